// bff-client.js — the browser's binding layer to the bff server's view models.
//
// One job: keep a local copy of the session's view-model outputs equal to the server's, tell the
// page when an output changes or a signal arrives, and forward the page's inputs as POSTs. It holds
// no presentation logic: what the user sees is decided by the view models on the server.
//
// Documented for page authors in docs/CLIENT.md. Runs on the page's main thread only (no workers).

const DEFAULT_STORAGE_KEY = "bff.sessionId";

/** Connection states reported through `onConnection`. */
const ConnectionState = Object.freeze({
    connecting: "connecting",
    open: "open",
    reconnecting: "reconnecting",
    paused: "paused",
    closed: "closed",
});

/**
 * A session with the bff server: one EventSource, a local copy of the outputs, an ordered input queue.
 *
 *     const client = new BffClient();
 *     client.on("greeting", "label", (label) => { output.textContent = label ?? ""; });
 *     client.start();
 *     client.send("greeting", "name", "Ada");
 */
export class BffClient {
    /**
     * @param {object} [options]
     * @param {string} [options.baseUrl=""]          origin prefix for API paths (same origin by default)
     * @param {Storage} [options.storage]            where the session id is kept (sessionStorage)
     * @param {string} [options.storageKey]          key of the session id in `storage`
     * @param {number} [options.hiddenCloseMs=30000] close the stream after the tab was hidden this long
     * @param {number} [options.backoffInitialMs=500] first reconnect delay after a hard stream failure
     * @param {number} [options.backoffMaxMs=30000]  longest reconnect delay
     * @param {number} [options.sendAttempts=4]      tries per input on network failure or 429
     */
    constructor(options = {}) {
        this.baseUrl = options.baseUrl ?? "";
        this.storage = options.storage ?? safeSessionStorage();
        this.storageKey = options.storageKey ?? DEFAULT_STORAGE_KEY;
        this.hiddenCloseMs = options.hiddenCloseMs ?? 30_000;
        this.backoffInitialMs = options.backoffInitialMs ?? 500;
        this.backoffMaxMs = options.backoffMaxMs ?? 30_000;
        this.sendAttempts = options.sendAttempts ?? 4;

        /** The current session id, or null before `start()` resolves. */
        this.sessionId = null;
        /** The `seq` of the last applied event (snapshot or view-model event); -1 before the first. */
        this.seq = -1;
        /** The current connection state (see `ConnectionState`). */
        this.connection = ConnectionState.closed;

        this._outputs = new Map(); // viewModel -> Map(output -> value)
        this._haveSnapshot = false;
        this._outputListeners = new Map(); // "vm\u0000output" -> Set(callback)
        this._signalListeners = new Map(); // "vm\u0000signal" -> Set(callback)
        this._connectionListeners = new Set();
        this._sessionListeners = new Set();
        this._errorListeners = new Set();
        this._viewModelNames = new Set();

        this._source = null;
        this._sourceNames = new Set(); // event names listened to on the current source
        this._failures = 0;
        this._retryTimer = null;
        this._hiddenTimer = null;
        this._started = false;
        this._stopped = false;
        this._ready = null; // promise of a session id
        this._renewing = null;
        this._queue = [];
        this._pumping = false;
        this._onVisibility = () => this._visibilityChanged();
    }

    // MARK: Subscribing

    /**
     * Calls `callback(value, previous)` whenever state output `output` of `viewModel` changes, and once
     * at once if its value is already known. Returns a function that unsubscribes.
     */
    on(viewModel, output, callback) {
        this._noteViewModel(viewModel);
        const unsubscribe = addListener(this._outputListeners, key(viewModel, output), callback);
        const outputs = this._outputs.get(viewModel);
        if (this._haveSnapshot && outputs && outputs.has(output)) callback(outputs.get(output), undefined);
        return unsubscribe;
    }

    /** Calls `callback(value)` for every signal `signal` of `viewModel`. Returns an unsubscribe function. */
    onSignal(viewModel, signal, callback) {
        this._noteViewModel(viewModel);
        return addListener(this._signalListeners, key(viewModel, signal), callback);
    }

    /** Calls `callback(state)` when the connection state changes (see `ConnectionState`). */
    onConnection(callback) {
        this._connectionListeners.add(callback);
        callback(this.connection);
        return () => this._connectionListeners.delete(callback);
    }

    /**
     * Calls `callback({id, reason, previousId})` when the client starts using a session. `reason` is
     * `"created"`, `"resumed"` (the stored id still worked) or `"replaced"`; for `"replaced"`,
     * `cause` says why the old session was given up: `"expired"`, `"deleted"` or `"not-found"`.
     */
    onSession(callback) {
        this._sessionListeners.add(callback);
        return () => this._sessionListeners.delete(callback);
    }

    /**
     * Calls `callback(problem, context)` when the server rejects an input or the session cannot be
     * created. `problem` is the RFC 9457 problem document (or one made up for a network failure);
     * `context` is `{viewModel, input}` or `{operation: "createSession"}`.
     */
    onError(callback) {
        this._errorListeners.add(callback);
        return () => this._errorListeners.delete(callback);
    }

    /** The last known value of an output, or `undefined`. */
    get(viewModel, output) {
        return this._outputs.get(viewModel)?.get(output);
    }

    // MARK: Lifecycle

    /**
     * Resumes the session stored in `storage` or creates one, and opens the event stream. Resolves with
     * the session id once a session is known (the stream may still be connecting).
     */
    start() {
        if (this._started) return this._ready;
        this._started = true;
        this._stopped = false;
        document.addEventListener("visibilitychange", this._onVisibility);
        const stored = this.storage?.getItem(this.storageKey) ?? null;
        if (stored) {
            this._ready = Promise.resolve(this._useSession(stored, { reason: "resumed" }));
        } else {
            // Creating the session is the first step of connecting: say so, or the page would show
            // the initial `closed` state ("Disconnected") for as long as POST /api/sessions takes.
            this._setConnection(ConnectionState.connecting);
            this._ready = this._createSession().then((id) => this._useSession(id, { reason: "created" }));
        }
        return this._ready;
    }

    /** Closes the stream and stops reconnecting. The session stays on the server (see `deleteSession`). */
    stop() {
        this._stopped = true;
        this._started = false;
        document.removeEventListener("visibilitychange", this._onVisibility);
        clearTimeout(this._retryTimer);
        clearTimeout(this._hiddenTimer);
        this._closeSource();
        this._setConnection(ConnectionState.closed);
    }

    /**
     * Deletes the session on the server and forgets it locally. Inputs sent afterwards are refused
     * until `start()` is called again (which creates a new session).
     */
    async deleteSession() {
        const id = this.sessionId;
        this.stop();
        this.storage?.removeItem(this.storageKey);
        this.sessionId = null;
        this._ready = null; // the old promise still resolves to the deleted id
        if (id) await fetch(this._url(`/api/sessions/${encodeURIComponent(id)}`), { method: "DELETE" });
    }

    // MARK: Inputs

    /**
     * Sends input `input` of `viewModel` with `value` (omit it for inputs that take none). Inputs are
     * sent one at a time in call order, so the server applies them in the order the user made them.
     * With `{coalesce: true}`, a value still waiting in the queue for the same input is replaced
     * instead of queued again (use it for text fields).
     *
     * Never rejects: resolves with `{ok: true, inputSeq}` or `{ok: false, problem}`; failures are also
     * reported to `onError`, except an input refused because the client is stopped (`stop()` or
     * `deleteSession()` was called): that one only resolves `{ok: false}`, it is the page's own doing.
     * The reply carries no view state — outputs arrive on the stream.
     */
    send(viewModel, input, value, options = {}) {
        return new Promise((resolve) => {
            const last = this._queue[this._queue.length - 1];
            if (options.coalesce && last && !last.started && last.viewModel === viewModel && last.input === input) {
                last.value = value;
                last.waiters.push(resolve);
                return;
            }
            this._queue.push({ viewModel, input, value, started: false, waiters: [resolve] });
            this._pump();
        });
    }

    async _pump() {
        if (this._pumping) return;
        this._pumping = true;
        try {
            while (this._queue.length > 0) {
                const item = this._queue[0];
                item.started = true;
                const result = await this._post(item);
                this._queue.shift();
                for (const resolve of item.waiters) resolve(result);
            }
        } finally {
            this._pumping = false;
        }
    }

    async _post(item, renewed = false) {
        if (!(await this._whenSession())) return { ok: false, problem: stoppedProblem() };
        const body = item.value === undefined ? "{}" : JSON.stringify({ value: item.value });
        const idempotencyKey = randomKey();
        const path = `/api/sessions/${encodeURIComponent(this.sessionId)}/` +
            `${encodeURIComponent(item.viewModel)}/${encodeURIComponent(item.input)}`;
        for (let attempt = 1; ; attempt++) {
            let response;
            try {
                response = await fetch(this._url(path), {
                    method: "POST",
                    headers: { "Content-Type": "application/json", "Idempotency-Key": idempotencyKey },
                    body,
                });
            } catch (error) {
                if (attempt < this.sendAttempts) {
                    await delay(this._backoffDelay(attempt));
                    continue;
                }
                return this._fail(networkProblem(error), item);
            }
            if (response.status === 202) {
                const reply = await readJSON(response);
                return { ok: true, inputSeq: reply?.inputSeq };
            }
            const problem = await readProblem(response);
            if (response.status === 429 && attempt < this.sendAttempts) {
                await delay(retryAfterMs(response) ?? this._backoffDelay(attempt));
                continue;
            }
            if (response.status === 404 && !renewed && (await this._sessionIsGone())) {
                await this._renew("not-found").catch(() => {}); // a stop meanwhile: the retry refuses
                return this._post(item, true);
            }
            return this._fail(problem, item);
        }
    }

    _fail(problem, item) {
        this._emit(this._errorListeners, problem, { viewModel: item.viewModel, input: item.input });
        return { ok: false, problem };
    }

    // MARK: Sessions

    async _createSession() {
        for (let attempt = 1; ; attempt++) {
            let response;
            try {
                response = await fetch(this._url("/api/sessions"), { method: "POST" });
                if (response.status === 201) {
                    const created = await readJSON(response);
                    if (created && typeof created.id === "string") return created.id;
                }
                this._emit(this._errorListeners, await readProblem(response), { operation: "createSession" });
            } catch (error) {
                this._emit(this._errorListeners, networkProblem(error), { operation: "createSession" });
            }
            this._setConnection(ConnectionState.reconnecting);
            await delay((response && retryAfterMs(response)) ?? this._backoffDelay(attempt));
            if (this._stopped) throw new Error("stopped");
        }
    }

    _useSession(id, info) {
        const previousId = this.sessionId;
        this.sessionId = id;
        this.storage?.setItem(this.storageKey, id);
        this.seq = -1;
        this._emit(this._sessionListeners, { id, previousId, ...info });
        this._openSource();
        return id;
    }

    /** Gives up the current session and starts a new one; concurrent callers share one renewal. */
    _renew(cause) {
        if (this._renewing) return this._renewing;
        this._closeSource();
        this.storage?.removeItem(this.storageKey);
        this._setConnection(ConnectionState.reconnecting);
        const renewal = this._createSession().then((id) => this._useSession(id, { reason: "replaced", cause }));
        this._renewing = renewal.finally(() => { this._renewing = null; });
        this._ready = renewal;
        return this._renewing;
    }

    /**
     * Waits for a usable session; false when the client is stopped (before or while waiting), so an
     * input is never posted to a stopped or deleted session (`/api/sessions/null/…`). A `send` before
     * the first `start()` starts the client.
     */
    async _whenSession() {
        if (this._stopped) return false;
        if (!this._ready) this.start();
        try {
            await this._ready;
            if (this._renewing) await this._renewing;
        } catch {
            return false; // session creation gave up because the client was stopped
        }
        return !this._stopped && this.sessionId !== null;
    }

    /** True only when the server says the session does not exist (404 on its state). */
    async _sessionIsGone() {
        try {
            const response = await fetch(this._url(`/api/sessions/${encodeURIComponent(this.sessionId)}/state`),
                { headers: { Accept: "application/json" } });
            return response.status === 404;
        } catch {
            return false;
        }
    }

    // MARK: The event stream

    _openSource() {
        if (this._stopped) return;
        this._closeSource();
        clearTimeout(this._retryTimer);
        this._setConnection(this._failures > 0 ? ConnectionState.reconnecting : ConnectionState.connecting);
        const source = new EventSource(this._url(`/api/sessions/${encodeURIComponent(this.sessionId)}/events`));
        this._source = source;
        this._sourceNames = new Set();
        source.addEventListener("open", () => {
            if (source !== this._source) return;
            this._failures = 0;
            this._setConnection(ConnectionState.open);
        });
        source.addEventListener("error", () => {
            if (source !== this._source) return;
            if (source.readyState === EventSource.CLOSED) this._streamFailed();
            else this._setConnection(ConnectionState.reconnecting); // native reconnect with Last-Event-ID
        });
        source.addEventListener("snapshot", (event) => this._onSnapshot(source, event));
        source.addEventListener("end", (event) => this._onEnd(source, event));
        for (const name of this._viewModelNames) this._listenTo(source, name);
    }

    _listenTo(source, viewModel) {
        if (this._sourceNames.has(viewModel) || viewModel === "snapshot" || viewModel === "end") return;
        this._sourceNames.add(viewModel);
        source.addEventListener(viewModel, (event) => this._onViewModelEvent(source, viewModel, event));
    }

    _closeSource() {
        if (this._source) this._source.close();
        this._source = null;
    }

    /** A hard failure (non-200 answer or a stream the browser gave up on): find out why, then retry. */
    async _streamFailed() {
        this._closeSource();
        this._failures += 1;
        this._setConnection(ConnectionState.reconnecting);
        if (await this._sessionIsGone()) {
            this._renew("not-found");
            return;
        }
        this._scheduleReopen();
    }

    _scheduleReopen() {
        clearTimeout(this._retryTimer);
        this._retryTimer = setTimeout(() => this._openSource(), this._backoffDelay(this._failures));
    }

    _onSnapshot(source, event) {
        if (source !== this._source) return;
        const snapshot = parseData(event);
        if (!snapshot || typeof snapshot.viewModels !== "object") return;
        this.seq = Number(event.lastEventId || snapshot.seq);
        const first = !this._haveSnapshot;
        this._haveSnapshot = true;
        const names = new Set([...this._outputs.keys(), ...Object.keys(snapshot.viewModels)]);
        for (const viewModel of names) {
            this._noteViewModel(viewModel);
            const incoming = snapshot.viewModels[viewModel] ?? {};
            const outputs = this._outputsOf(viewModel);
            const changed = [];
            for (const [output, value] of Object.entries(incoming)) {
                if (first || !outputs.has(output) || !sameValue(outputs.get(output), value)) {
                    changed.push([output, value, outputs.get(output)]);
                }
                outputs.set(output, value);
            }
            for (const [output, value, previous] of changed) this._notifyOutput(viewModel, output, value, previous);
        }
    }

    _onViewModelEvent(source, viewModel, event) {
        if (source !== this._source) return;
        const id = Number(event.lastEventId);
        if (Number.isFinite(id) && id <= this.seq) return; // already applied (replayed after reconnect)
        if (Number.isFinite(id)) this.seq = id;
        const data = parseData(event);
        if (!data) return;
        const outputs = this._outputsOf(viewModel);
        for (const [output, value] of Object.entries(data.outputs ?? {})) {
            const previous = outputs.get(output);
            outputs.set(output, value);
            this._notifyOutput(viewModel, output, value, previous);
        }
        for (const [signal, value] of Object.entries(data.signals ?? {})) {
            this._emit(this._signalListeners.get(key(viewModel, signal)), value);
        }
    }

    _onEnd(source, event) {
        if (source !== this._source) return;
        const reason = parseData(event)?.reason ?? "unknown";
        this._closeSource();
        if (reason === "expired" || reason === "deleted") {
            this._renew(reason);
        } else {
            // "shutdown" (or anything new): the server is going away. Handled as a hard stream failure:
            // one failure counted, the session probe, then one backoff before reopening (not two).
            this._streamFailed();
        }
    }

    // MARK: Hidden tabs

    _visibilityChanged() {
        clearTimeout(this._hiddenTimer);
        if (document.visibilityState === "hidden") {
            this._hiddenTimer = setTimeout(() => {
                if (!this._source) return;
                this._closeSource();
                clearTimeout(this._retryTimer);
                this._setConnection(ConnectionState.paused);
            }, this.hiddenCloseMs);
        } else if (this.connection === ConnectionState.paused && this.sessionId) {
            this._openSource(); // a fresh stream starts with a snapshot, so nothing missed is lost
        }
    }

    // MARK: Helpers

    _noteViewModel(viewModel) {
        if (this._viewModelNames.has(viewModel)) return;
        this._viewModelNames.add(viewModel);
        if (this._source) this._listenTo(this._source, viewModel);
    }

    _outputsOf(viewModel) {
        let outputs = this._outputs.get(viewModel);
        if (!outputs) {
            outputs = new Map();
            this._outputs.set(viewModel, outputs);
        }
        return outputs;
    }

    _notifyOutput(viewModel, output, value, previous) {
        this._emit(this._outputListeners.get(key(viewModel, output)), value, previous);
    }

    _setConnection(state) {
        if (this.connection === state) return;
        this.connection = state;
        this._emit(this._connectionListeners, state);
    }

    _backoffDelay(attempt) {
        const ceiling = Math.min(this.backoffMaxMs, this.backoffInitialMs * 2 ** Math.max(0, attempt - 1));
        return ceiling / 2 + Math.random() * (ceiling / 2); // "equal jitter"
    }

    _url(path) {
        return this.baseUrl + path;
    }

    _emit(listeners, ...args) {
        if (!listeners) return;
        for (const callback of [...listeners]) {
            try {
                callback(...args);
            } catch (error) {
                console.error("bff-client: a listener threw", error);
            }
        }
    }
}

function key(a, b) {
    return `${a}\u0000${b}`;
}

function addListener(map, mapKey, callback) {
    let set = map.get(mapKey);
    if (!set) {
        set = new Set();
        map.set(mapKey, set);
    }
    set.add(callback);
    return () => set.delete(callback);
}

function sameValue(a, b) {
    return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function parseData(event) {
    try {
        return JSON.parse(event.data);
    } catch {
        console.error("bff-client: an event's data is not JSON", event.type);
        return null;
    }
}

async function readJSON(response) {
    try {
        return await response.json();
    } catch {
        return null;
    }
}

async function readProblem(response) {
    const body = await readJSON(response);
    if (body && typeof body === "object" && "status" in body) return body;
    return { type: "about:blank", title: response.statusText || "Error", status: response.status,
             detail: `the server answered ${response.status}` };
}

function stoppedProblem() {
    return { type: "about:blank", title: "Client stopped", status: 0,
             detail: "the input was not sent: the client is stopped (start it again to send)" };
}

function networkProblem(error) {
    return { type: "about:blank", title: "Network error", status: 0,
             detail: `the server could not be reached (${error?.message ?? error})` };
}

function retryAfterMs(response) {
    const seconds = Number(response.headers.get("Retry-After"));
    return Number.isFinite(seconds) && seconds >= 0 && response.headers.has("Retry-After") ? seconds * 1000 : null;
}

function delay(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function randomKey() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function safeSessionStorage() {
    try {
        return window.sessionStorage;
    } catch {
        return null; // storage disabled: every load starts a new session
    }
}
