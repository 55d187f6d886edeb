// shared-stream.js — a tab's view of the browser's one event-stream connection: it joins the connection's
// owner (a SharedWorker or the elected tab, stream-link.js) with its session and the last seq it applied,
// applies what arrives for its session, pauses while the tab is hidden, and leaves when the tab goes.
//
// One job: the tab's part of the shared stream, with the same face as event-stream.js (`open`, `close`,
// `stop`, `listenTo`, `watchVisibility`, `isOpen`, `hiddenCloseMs`), so the session and the input queue
// do not know which one they have. `end` `deleted`/`expired` replace the session; any other `end`, and a
// stream the server refused, make the tab ask whether its session still exists (a new one when not, else
// it joins again after a backoff). Main thread only.
export class SharedStream {
    /**
     * @param {object} deps  as for EventStream (event-stream.js), and:
     * @param {object} deps.link                       the link to the owner (stream-link.js)
     * @param {() => object|null} deps.relink          another link when this one breaks (null: none)
     * @param {() => object} deps.direct               the session's own stream, when no link works
     */
    constructor(deps) {
        this._deps = deps;
        /** Close the stream after the tab has been hidden this long (ms). */
        this.hiddenCloseMs = deps.hiddenCloseMs;
        this._joined = false; // this tab's session is (being) carried by the owner's stream
        this._failures = 0;
        this._retryTimer = null;
        this._hiddenTimer = null;
        this._direct = null; // the session's own stream, once no link works
        this._onVisibility = () => this._visibilityChanged();
        this._onPageHide = () => this._send({ type: "leave" });
        this._onPageShow = (event) => { if (event.persisted && this._joined) this._join(); };
        this._useLink(deps.link);
    }

    /** `shared-worker`, `web-locks-owner`, `web-locks-follower` or `direct`. */
    get transport() {
        if (this._direct || !this._link) return "direct";
        return this._link.kind === "web-locks" ? `web-locks-${this._link.role}` : this._link.kind;
    }

    /** True while the tab's session is carried (or being joined), as an EventSource would be open. */
    get isOpen() {
        return this._direct ? this._direct.isOpen : this._joined;
    }

    /** Starts watching the tab's visibility and its going away. */
    watchVisibility() {
        if (this._direct) return this._direct.watchVisibility();
        document.addEventListener("visibilitychange", this._onVisibility);
        addEventListener("pagehide", this._onPageHide);
        addEventListener("pageshow", this._onPageShow);
    }

    /** Leaves for good (until `open`), with its timers. */
    stop() {
        document.removeEventListener("visibilitychange", this._onVisibility);
        removeEventListener("pagehide", this._onPageHide);
        removeEventListener("pageshow", this._onPageShow);
        clearTimeout(this._retryTimer);
        clearTimeout(this._hiddenTimer);
        this.close();
        this._direct?.stop();
    }

    /** Joins the owner with the current session (again: it resumes from the last applied seq). */
    open() {
        if (this._direct) return this._direct.open();
        if (this._deps.session.stopped) return;
        clearTimeout(this._retryTimer);
        this._joined = true;
        this._deps.setConnection(this._failures > 0 ? "reconnecting" : "connecting");
        this._join();
    }

    /** The owner learns every view model from the snapshots; the names go with each join too. */
    listenTo(viewModel) {
        this._direct?.listenTo(viewModel);
    }

    /** Leaves the owner: this tab's session is no longer carried. */
    close() {
        if (this._direct) return this._direct.close();
        if (this._joined) this._send({ type: "leave" });
        this._joined = false;
    }

    _join() {
        const { session, store } = this._deps;
        this._send({ type: "join", session: session.id, seq: store.seq, names: [...store.viewModelNames] });
    }

    _send(message) {
        this._link?.post(message);
    }

    _useLink(link) {
        this._link = link;
        link.onMessage = (message) => { if (this._link === link) this._received(message); };
        link.onBroken = () => { if (this._link === link) this._broken(); };
    }

    /** The link cannot work (the worker did not start): the next kind of link, or the session's own stream. */
    _broken() {
        const next = this._deps.relink();
        const joined = this._joined;
        if (next) {
            this._useLink(next);
            if (joined) this._join();
            return;
        }
        this._link = null;
        this._direct = this._deps.direct();
        this._direct.hiddenCloseMs = this.hiddenCloseMs;
        this._direct.watchVisibility();
        if (joined) this._direct.open();
    }

    _received(message) {
        if (!message || typeof message !== "object") return;
        const { setConnection, store, session } = this._deps;
        switch (message.type) {
        case "owner": // a new owner: join it where this tab is
            if (this._joined) this._join();
            break;
        case "state":
            if (!this._joined) break;
            if (message.state === "open") this._failures = 0;
            setConnection(message.state);
            break;
        case "failed": // the server refused the stream: is the session still there?
            if (this._joined) this._failed();
            break;
        case "event": {
            const data = message.data;
            if (!this._joined || !data || data.session !== session.id) break; // an older session's
            if (message.name === "snapshot") store.applySnapshot(data, data.seq);
            else if (message.name === "end") this._onEnd(data);
            else store.applyEvent(message.name, data, data.seq);
            break;
        }
        default:
            break;
        }
    }

    _onEnd(data) {
        const reason = data.reason ?? "unknown";
        this._joined = false; // the owner let the session go
        if (reason === "expired" || reason === "deleted" || reason === "signed-out") this._deps.session.renew(reason);
        else this._failed(); // notFound, tooManyStreams, unavailable, or anything new
    }

    /** Asks whether the session still exists: a new one when not, else joins again after a backoff. */
    async _failed() {
        const { session, setConnection, backoffDelay } = this._deps;
        this._failures += 1;
        setConnection("reconnecting");
        const id = session.id;
        if (await session.isGone(id)) {
            if (session.id === id) session.renew("not-found");
            return;
        }
        if (this._joined) return; // still carried: the owner opens the stream again by itself
        clearTimeout(this._retryTimer);
        this._retryTimer = setTimeout(() => this.open(), backoffDelay(this._failures));
    }

    _visibilityChanged() {
        const { session, setConnection, connection } = this._deps;
        clearTimeout(this._hiddenTimer);
        if (document.visibilityState === "hidden") {
            this._hiddenTimer = setTimeout(() => {
                if (!this._joined) return;
                this.close();
                clearTimeout(this._retryTimer);
                setConnection("paused");
            }, this.hiddenCloseMs);
        } else if (connection() === "paused" && session.id) {
            this.open(); // resumes from the last applied seq: a replay, or a snapshot when too old
        }
    }
}
