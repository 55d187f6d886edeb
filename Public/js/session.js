// session.js — which server session the client uses: resume the stored id, create one (retried with
// backoff while the server cannot take it: no answer, 429, 502, 503, 504), replace a session the
// server no longer knows, delete it.
//
// One job: the session id. It says when a session is taken into use (`onUse`) or replaces a lost one
// (`onReplaced`), and leaves streams and inputs to the other modules. Main thread only.
import { delay, emit, isRetryable, readJSON, readProblem, retryAfterMs } from "./bff-support.js";

export class Session {
    /**
     * @param {object} deps
     * @param {(path: string) => string} deps.url
     * @param {Storage|null} deps.storage        where the id is kept (a reload resumes the session)
     * @param {string} deps.storageKey
     * @param {(attempt: number) => number} deps.backoffDelay
     * @param {(state: string) => void} deps.setConnection
     * @param {Set<Function>} deps.sessionListeners  `onSession` listeners
     * @param {Set<Function>} deps.errorListeners    `onError` listeners
     * @param {(id: string) => void} deps.onUse      a session was taken into use: open its stream
     * @param {() => void} deps.onReplaced           a new session replaced a lost one: send it the carry-over
     * @param {() => void} deps.onRenew              the current session is being given up: close its stream
     * @param {() => void} deps.autoStart            starts the client (an input sent before `start()`)
     */
    constructor(deps) {
        this._deps = deps;
        /** The current session id, or null. */
        this.id = null;
        /** True after `stop()` until the next `start()`. */
        this.stopped = false;
        this._started = false;
        this._ready = null; // promise of a session id
        this._renewing = null;
    }

    /** Resumes the stored session or creates one; resolves with its id. */
    start() {
        if (this._started) return this._ready;
        this._started = true;
        this.stopped = false;
        const { storage, storageKey, setConnection } = this._deps;
        const stored = storage?.getItem(storageKey) ?? null;
        if (stored) {
            this._ready = Promise.resolve(this._use(stored, { reason: "resumed" }));
        } else {
            // Creating the session is the first step of connecting: say so, or the page would show
            // the initial `closed` state ("Disconnected") for as long as POST /api/sessions takes.
            setConnection("connecting");
            this._ready = this._create().then((id) => this._use(id, { reason: "created" }));
        }
        return this._ready;
    }

    /** Stops using the session (it stays on the server). */
    stop() {
        this.stopped = true;
        this._started = false;
    }

    /** Stops, forgets the session and deletes it on the server. */
    async delete() {
        const id = this.id;
        this.stop();
        this._deps.storage?.removeItem(this._deps.storageKey);
        this.id = null;
        this._ready = null; // the old promise still resolves to the deleted id
        if (id) await fetch(this._deps.url(`/api/sessions/${encodeURIComponent(id)}`), { method: "DELETE" });
    }

    /** Gives up the current session and starts a new one; concurrent callers share one renewal. */
    renew(cause) {
        if (this._renewing) return this._renewing;
        const { storage, storageKey, setConnection, onRenew } = this._deps;
        onRenew();
        storage?.removeItem(storageKey);
        setConnection("reconnecting");
        const renewal = this._create().then((id) => this._use(id, { reason: "replaced", cause }));
        this._renewing = renewal.finally(() => { this._renewing = null; });
        this._ready = renewal;
        return this._renewing;
    }

    /**
     * Waits for a usable session; false when the client is stopped (before or while waiting), so an
     * input is never posted to a stopped or deleted session. A call before the first `start()` starts it.
     */
    async whenReady() {
        if (this.stopped) return false;
        if (!this._ready) this._deps.autoStart();
        try {
            await this._ready;
            if (this._renewing) await this._renewing;
        } catch {
            return false; // session creation gave up because the client was stopped
        }
        return !this.stopped && this.id !== null;
    }

    /** True only when the server says the session (default: the current one) does not exist (404 on its state). */
    async isGone(id = this.id) {
        try {
            const response = await fetch(this._deps.url(`/api/sessions/${encodeURIComponent(id)}/state`),
                { headers: { Accept: "application/json" } });
            return response.status === 404;
        } catch {
            return false;
        }
    }

    /**
     * `POST /api/sessions` until it succeeds. While the server cannot take it (no answer, `429`, `5xx`
     * "not now") the connection says `reconnecting` and nothing is reported: that is not an error the
     * user can act on, and it ends by itself. Any other answer goes to `onError` (and is tried again).
     */
    async _create() {
        const { url, backoffDelay, setConnection, errorListeners } = this._deps;
        for (let attempt = 1; ; attempt++) {
            let response;
            try {
                response = await fetch(url("/api/sessions"), { method: "POST" });
                if (response.status === 201) {
                    const created = await readJSON(response);
                    if (created && typeof created.id === "string") return created.id;
                }
                if (!isRetryable(response.status)) {
                    emit(errorListeners, await readProblem(response), { operation: "createSession" });
                }
            } catch {
                // no answer: reconnecting, tried again below
            }
            setConnection("reconnecting");
            await delay((response && retryAfterMs(response)) ?? backoffDelay(attempt));
            if (this.stopped) throw new Error("stopped");
        }
    }

    _use(id, info) {
        const previousId = this.id;
        this.id = id;
        this._deps.storage?.setItem(this._deps.storageKey, id);
        emit(this._deps.sessionListeners, { id, previousId, ...info });
        if (info.reason === "replaced") this._deps.onReplaced();
        this._deps.onUse(id);
        return id;
    }
}
