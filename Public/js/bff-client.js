// bff-client.js — the browser's binding layer to the bff server's view models: one object a page
// uses, composed of the four parts that do the work:
//
//   session.js       which server session (resume, create, replace, delete)
//   input-queue.js   the page's inputs, POSTed one at a time in order
//   event-stream.js  the SSE stream (reconnects, hidden tabs)
//   output-store.js  the local copy of the outputs and their listeners
//
// It holds no presentation logic: what the user sees is decided by the view models on the server.
// Documented for page authors in docs/CLIENT.md. Main thread only (no workers).
import { backoffDelay, emit } from "./bff-support.js";
import { EventStream } from "./event-stream.js";
import { InputQueue } from "./input-queue.js";
import { OutputStore } from "./output-store.js";
import { Session } from "./session.js";

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
        const baseUrl = options.baseUrl ?? "";
        const url = (path) => baseUrl + path;
        const initialMs = options.backoffInitialMs ?? 500;
        const maxMs = options.backoffMaxMs ?? 30_000;
        const backoff = (attempt) => backoffDelay(attempt, initialMs, maxMs);
        const setConnection = (state) => this._setConnection(state);

        /** The current connection state: `connecting`, `open`, `reconnecting`, `paused`, `closed`. */
        this.connection = "closed";
        this._connectionListeners = new Set();
        this._sessionListeners = new Set();
        this._errorListeners = new Set();

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
            autoStart: () => this.start(),
        });
        this._stream = new EventStream({
            url, session: this._session, store: this._store, backoffDelay: backoff,
            hiddenCloseMs: options.hiddenCloseMs ?? 30_000, setConnection, connection: () => this.connection,
        });
        this._inputs = new InputQueue({
            url, session: this._session, sendAttempts: options.sendAttempts ?? 4, backoffDelay: backoff,
            errorListeners: this._errorListeners,
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

    /** Calls `callback(state)` when the connection state changes (and once at once). */
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
     * Calls `callback(problem, context)` when the server rejects an input or the session cannot be
     * created; `context` is `{viewModel, input}` or `{operation: "createSession"}`.
     */
    onError(callback) {
        this._errorListeners.add(callback);
        return () => this._errorListeners.delete(callback);
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
        this._setConnection("closed");
    }

    /** Deletes the session on the server and forgets it; inputs are refused until `start()` again. */
    async deleteSession() {
        this._stream.stop();
        this._setConnection("closed");
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

    _setConnection(state) {
        if (this.connection === state) return;
        this.connection = state;
        emit(this._connectionListeners, state);
    }
}

function safeSessionStorage() {
    try {
        return window.sessionStorage;
    } catch {
        return null; // storage disabled: every load starts a new session
    }
}
