// bff-client.js — the browser's binding layer to the bff server's view models: one object a page
// uses, composed of the four parts that do the work:
//
//   session.js       which server session (resume, create, replace, delete)
//   input-queue.js   the page's inputs, POSTed one at a time in order (retries: input-retry.js)
//   shared-stream.js this tab's part of the browser's one event stream (a SharedWorker or an elected
//                    tab owns it: stream-link.js); event-stream.js, the session's own stream, where
//                    the browser has neither
//   output-store.js  the local copy of the outputs and their listeners
//
// It holds no presentation logic: what the user sees is decided by the view models on the server.
// Documented for page authors in docs/CLIENT.md. Main thread only (the shared stream's owner may be a
// SharedWorker: stream-worker.js).
import { backoffDelay, emit } from "./bff-support.js";
import { EventStream } from "./event-stream.js";
import { InputQueue } from "./input-queue.js";
import { INPUT_RETRY_MS } from "./input-retry.js";
import { OutputStore } from "./output-store.js";
import { Session } from "./session.js";
import { SharedStream } from "./shared-stream.js";
import { connectStreamLink } from "./stream-link.js";

/** After inputs were given up with the stream open: the pause before the carry-over is tried again (ms). */
const RESYNC_PAUSE_MS = 5_000;

/**
 * A session with the bff server: its event stream, a local copy of the outputs, an ordered input queue.
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
     * @param {number} [options.inputRetryMs=30000] how long an input is tried again (no answer, 429, 502-504)
     */
    constructor(options = {}) {
        const baseUrl = options.baseUrl ?? "";
        const url = (path) => baseUrl + path;
        const initialMs = options.backoffInitialMs ?? 500;
        const maxMs = options.backoffMaxMs ?? 30_000;
        const backoff = (attempt) => backoffDelay(attempt, initialMs, maxMs);
        const setConnection = (state) => this._setStreamState(state);

        /**
         * The current connection state: `connecting`, `open`, `reconnecting`, `paused`, `closed`. It is
         * the stream's state, but `reconnecting` also while an input waits for an unavailable server.
         */
        this.connection = "closed";
        /** How long an input is tried again before it is given up (ms; settable). */
        this.inputRetryMs = options.inputRetryMs ?? INPUT_RETRY_MS;
        this._streamState = "closed";
        this._inputsStalled = false;
        this._connectionListeners = new Set();
        this._sessionListeners = new Set();
        this._errorListeners = new Set();
        this._sentListeners = new Set();
        this._carryOvers = new Set();

        this._store = new OutputStore((viewModel) => this._stream?.listenTo(viewModel));
        this._session = new Session({
            url, storage: options.storage ?? safeSessionStorage(), storageKey: options.storageKey ?? "bff.sessionId",
            backoffDelay: backoff, setConnection, sessionListeners: this._sessionListeners,
            errorListeners: this._errorListeners,
            onUse: () => {
                this._store.resetSeq();
                this._stream.open();
            },
            onRenew: () => this._stream.close(),
            onReplaced: () => this._inputs.resync(),
            autoStart: () => this.start(),
        });
        const streamDeps = {
            url, session: this._session, store: this._store, backoffDelay: backoff,
            hiddenCloseMs: options.hiddenCloseMs ?? 30_000, setConnection, connection: () => this._streamState,
        };
        this._stream = createStream(streamDeps, new URL(url("/api/events"), document.baseURI).href);
        this._inputs = new InputQueue({
            url, session: this._session, retryWindowMs: () => this.inputRetryMs,
            errorListeners: this._errorListeners, sentListeners: this._sentListeners,
            setStalled: (stalled) => this._setInputsStalled(stalled),
            carryOver: () => [...this._carryOvers].flatMap((provide) => provide() ?? []),
        });
        // Inputs given up while the stream stays open (the server is up, the inputs' part of it was not):
        // the carry-over is tried again after a pause, not only when the user acts or the stream reopens,
        // so what the page says ("sent again when the server answers") happens by itself. One try per
        // pause plus retry window: bounded.
        this.resyncPauseMs = options.resyncPauseMs ?? RESYNC_PAUSE_MS;
        this._resyncTimer = null;
        this._errorListeners.add((problem, context) => {
            if (!context.gaveUp) return;
            clearTimeout(this._resyncTimer);
            this._resyncTimer = setTimeout(() => {
                if (this._streamState === "open" && this._inputs.carryOverDue) this._inputs.resync();
            }, this.resyncPauseMs);
        });
    }

    /** The current session id, or null before `start()` resolves. */
    get sessionId() {
        return this._session.id;
    }

    /** The `seq` of the last applied event (snapshot or view-model event); -1 before the first. */
    get seq() {
        return this._store.seq;
    }

    /** True while the event stream is open or connecting (false when paused, stopped or failed). */
    get streamOpen() {
        return this._stream.isOpen;
    }

    /**
     * How this tab gets its events: `shared-worker`, `web-locks-owner` (this tab holds the browser's one
     * connection for every tab), `web-locks-follower`, or `direct` (its session's own stream).
     */
    get streamTransport() {
        return this._stream.transport ?? "direct";
    }

    /** Close the stream after the tab has been hidden this long (ms). */
    get hiddenCloseMs() {
        return this._stream.hiddenCloseMs;
    }

    set hiddenCloseMs(ms) {
        this._stream.hiddenCloseMs = ms;
    }

    // MARK: Subscribing

    /**
     * Calls `callback(value, previous)` whenever state output `output` of `viewModel` changes, and once
     * at once if its value is already known. Returns a function that unsubscribes.
     */
    on(viewModel, output, callback) {
        return this._store.on(viewModel, output, callback);
    }

    /** Calls `callback(value)` for every signal `signal` of `viewModel`. Returns an unsubscribe function. */
    onSignal(viewModel, signal, callback) {
        return this._store.onSignal(viewModel, signal, callback);
    }

    /**
     * Calls `callback(state)` when the connection state changes (and once at once); see `connection`.
     */
    onConnection(callback) {
        this._connectionListeners.add(callback);
        callback(this.connection);
        return () => this._connectionListeners.delete(callback);
    }

    /**
     * Calls `callback({id, reason, previousId, cause})` when the client starts using a session. `reason`
     * is `"created"`, `"resumed"` or `"replaced"`; for `"replaced"`, `cause` is `"expired"`, `"deleted"`
     * or `"not-found"`.
     */
    onSession(callback) {
        this._sessionListeners.add(callback);
        return () => this._sessionListeners.delete(callback);
    }

    /**
     * Calls `callback(problem, context)` when the server refuses an input (`context` `{viewModel, input}`),
     * an input is given up after `inputRetryMs` (`{viewModel, input, gaveUp: true}`), or a session
     * creation is refused other than "not now" (`{operation: "createSession"}`).
     */
    onError(callback) {
        this._errorListeners.add(callback);
        return () => this._errorListeners.delete(callback);
    }

    /** Calls `callback({viewModel, input, inputSeq})` for every input the server acknowledged (`202`). */
    onSent(callback) {
        this._sentListeners.add(callback);
        return () => this._sentListeners.delete(callback);
    }

    /**
     * Registers what the user has entered on this page, as inputs: `provide()` returns
     * `[[viewModel, input, value], …]` (e.g. a text field's current value). They are sent, before any
     * input still waiting, to a new session that replaces a lost one, and after inputs were given up
     * once the server answers again: the user's own input, so the flow stays one-way. Returns a
     * function that unregisters.
     */
    carryOver(provide) {
        this._carryOvers.add(provide);
        return () => this._carryOvers.delete(provide);
    }

    /** The last known value of an output, or `undefined`. */
    get(viewModel, output) {
        return this._store.get(viewModel, output);
    }

    // MARK: Lifecycle

    /** Resumes the stored session or creates one, and opens the stream; resolves with the session id. */
    start() {
        this._stream.watchVisibility();
        return this._session.start();
    }

    /** Closes the stream and stops reconnecting. The session stays on the server (see `deleteSession`). */
    stop() {
        this._session.stop();
        this._stream.stop();
        this._setStreamState("closed");
    }

    /** Deletes the session on the server and forgets it; inputs are refused until `start()` again. */
    async deleteSession() {
        this._stream.stop();
        this._setStreamState("closed");
        await this._session.delete();
    }

    // MARK: Inputs

    /**
     * Sends input `input` of `viewModel` with `value` (omit it for inputs that take none), in call
     * order; `{coalesce: true}` replaces a value of the same input still waiting in the queue. Never
     * rejects: resolves `{ok: true, inputSeq}` or `{ok: false, problem}` (see docs/CLIENT.md).
     */
    send(viewModel, input, value, options = {}) {
        return this._inputs.send(viewModel, input, value, options);
    }

    /** The stream's (and session creation's) state; the connection adds what the inputs meet. */
    _setStreamState(state) {
        this._streamState = state;
        if (state === "open" && this._inputs?.carryOverDue) this._inputs.resync(); // answering again
        this._updateConnection();
    }

    /** An input waits for a server that does not answer (or answers "not now"): that is reconnecting too. */
    _setInputsStalled(stalled) {
        this._inputsStalled = stalled;
        this._updateConnection();
    }

    _updateConnection() {
        const state = this._inputsStalled && this._streamState !== "closed" ? "reconnecting" : this._streamState;
        if (this.connection === state) return;
        this.connection = state;
        emit(this._connectionListeners, state);
    }
}

/**
 * The tab's event stream: its part of the browser's one shared connection (a SharedWorker, or the tab
 * elected with Web Locks; see shared-stream.js), or, where the browser has neither, its session's own
 * stream (event-stream.js).
 */
function createStream(deps, eventsUrl) {
    const link = connectStreamLink(eventsUrl);
    if (!link) return new EventStream(deps);
    return new SharedStream({
        ...deps, link,
        relink: () => connectStreamLink(eventsUrl, { worker: false }),
        direct: () => new EventStream(deps),
    });
}

function safeSessionStorage() {
    try {
        return window.sessionStorage;
    } catch {
        return null; // storage disabled: every load starts a new session
    }
}
