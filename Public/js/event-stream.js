// event-stream.js — the session's Server-Sent Events stream: open it, reconnect it, pause it while
// the tab is hidden, and hand each event to the output store.
//
// One job: the EventSource. `Last-Event-ID` replays are the browser's own reconnects; a stream the
// browser gave up on is probed (does the session still exist?) and reopened after a jittered backoff,
// or the session is replaced. Main thread only.
export class EventStream {
    /**
     * @param {object} deps
     * @param {(path: string) => string} deps.url
     * @param {import("./session.js").Session} deps.session
     * @param {import("./output-store.js").OutputStore} deps.store
     * @param {(attempt: number) => number} deps.backoffDelay
     * @param {number} deps.hiddenCloseMs                 close the stream after the tab was hidden this long
     * @param {(state: string) => void} deps.setConnection
     * @param {() => string} deps.connection              the current connection state
     */
    constructor(deps) {
        this._deps = deps;
        /** Close the stream after the tab has been hidden this long (ms). */
        this.hiddenCloseMs = deps.hiddenCloseMs;
        this._source = null;
        this._names = new Set(); // event names listened to on the current source
        this._failures = 0;
        this._retryTimer = null;
        this._hiddenTimer = null;
        this._onVisibility = () => this._visibilityChanged();
    }

    /** True while an EventSource exists (open or connecting). */
    get isOpen() {
        return this._source !== null;
    }

    /** Starts watching the tab's visibility. */
    watchVisibility() {
        document.addEventListener("visibilitychange", this._onVisibility);
    }

    /** Closes the stream for good (until `open`), with its timers. */
    stop() {
        document.removeEventListener("visibilitychange", this._onVisibility);
        clearTimeout(this._retryTimer);
        clearTimeout(this._hiddenTimer);
        this.close();
    }

    /** Opens (or reopens) the stream of the current session. */
    open() {
        const { url, session, store, setConnection } = this._deps;
        if (session.stopped) return;
        this.close();
        clearTimeout(this._retryTimer);
        setConnection(this._failures > 0 ? "reconnecting" : "connecting");
        const source = new EventSource(url(`/api/sessions/${encodeURIComponent(session.id)}/events`));
        this._source = source;
        this._names = new Set();
        source.addEventListener("open", () => {
            if (source !== this._source) return;
            this._failures = 0;
            setConnection("open");
        });
        source.addEventListener("error", () => {
            if (source !== this._source) return;
            if (source.readyState === EventSource.CLOSED) this._failed();
            else setConnection("reconnecting"); // native reconnect with Last-Event-ID
        });
        source.addEventListener("snapshot", (event) => {
            if (source === this._source) store.applySnapshot(parseData(event), event.lastEventId);
        });
        source.addEventListener("end", (event) => this._onEnd(source, event));
        for (const name of store.viewModelNames) this.listenTo(name);
    }

    /** Listens for the events of `viewModel` on the current stream. */
    listenTo(viewModel) {
        const source = this._source;
        if (!source || this._names.has(viewModel) || viewModel === "snapshot" || viewModel === "end") return;
        this._names.add(viewModel);
        source.addEventListener(viewModel, (event) => {
            if (source !== this._source) return;
            this._deps.store.applyEvent(viewModel, parseData(event), event.lastEventId);
        });
    }

    close() {
        if (this._source) this._source.close();
        this._source = null;
    }

    /** A hard failure (non-200 answer or a stream the browser gave up on): find out why, then retry. */
    async _failed() {
        const { session, setConnection, backoffDelay } = this._deps;
        this.close();
        this._failures += 1;
        setConnection("reconnecting");
        if (await session.isGone()) {
            session.renew("not-found");
            return;
        }
        clearTimeout(this._retryTimer);
        this._retryTimer = setTimeout(() => this.open(), backoffDelay(this._failures));
    }

    _onEnd(source, event) {
        if (source !== this._source) return;
        const reason = parseData(event)?.reason ?? "unknown";
        this.close();
        if (reason === "expired" || reason === "deleted" || reason === "signed-out") {
            this._deps.session.renew(reason);
        } else {
            // "shutdown" (or anything new): the server is going away. Handled as a hard stream failure:
            // one failure counted, the session probe, then one backoff before reopening (not two).
            this._failed();
        }
    }

    _visibilityChanged() {
        const { session, setConnection, connection } = this._deps;
        clearTimeout(this._hiddenTimer);
        if (document.visibilityState === "hidden") {
            this._hiddenTimer = setTimeout(() => {
                if (!this._source) return;
                this.close();
                clearTimeout(this._retryTimer);
                setConnection("paused");
            }, this.hiddenCloseMs);
        } else if (connection() === "paused" && session.id) {
            this.open(); // a fresh stream starts with a snapshot, so nothing missed is lost
        }
    }
}

function parseData(event) {
    try {
        return JSON.parse(event.data);
    } catch {
        console.error("bff-client: an event's data is not JSON", event.type);
        return null;
    }
}
