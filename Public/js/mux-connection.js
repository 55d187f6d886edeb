// mux-connection.js — one connection on the multiplexed stream (`GET /api/events?sessions=…`) for a list
// of sessions, and its replacement when the list changes.
//
// One job: the EventSource. A new list opens a new stream (each kept session resumes at its last seq,
// `ID:LAST`); the old stream is closed once the new one is open, so nothing falls between the two (the
// hub drops what arrives twice). The browser's own reconnect resumes every session through the stream's
// `id:` position (`Last-Event-ID`); a stream the browser gave up on (a non-200 answer) is opened again
// after a jittered backoff. Runs in the connection owner only: the SharedWorker, or the main thread of the
// tab elected to own the connection (stream-election.js).

/** The stream's fixed event names; view models' names are added as the hub learns them. */
const FIXED_NAMES = ["snapshot", "end"];

export class MuxConnection {
    /**
     * @param {object} deps
     * @param {string} deps.eventsUrl                     absolute URL of `/api/events`
     * @param {typeof EventSource} deps.EventSource
     * @param {() => Iterable<string>} deps.names          view-model event names to listen to
     * @param {(session: string) => number|null} deps.position  last seq the hub has of a session
     * @param {(name: string, data: object, conn: MuxConnection) => void} deps.onFrame
     * @param {(sessions: string[], state: string) => void} deps.onState  `open` or `reconnecting`
     * @param {(sessions: string[]) => void} deps.onFailed  a stream was refused (non-200) or given up
     * @param {(attempt: number) => number} deps.backoffDelay
     * @param {number} [deps.settleMs=20]                 list changes closer than this share one new stream
     */
    constructor(deps) {
        this._deps = deps;
        /** The sessions this connection should carry, in list order. */
        this.sessions = [];
        this._current = null; // {source, list, names}: the stream that opened last
        this._pending = null; // the stream replacing it, not open yet
        this._timer = null;
        this._force = false; // the scheduled stream is opened even for an unchanged list
        this._failures = 0;
    }

    get isEmpty() {
        return this.sessions.length === 0;
    }

    /** True when the open stream carries `session`. */
    isOpenWith(session) {
        const current = this._current;
        return current !== null && current.source.readyState === 1 && current.list.includes(session);
    }

    /**
     * Adds a session: a new stream soon (changes made together share it), even when the open one still
     * lists it (its tab left and one joined again at once: it starts over from the hub's position).
     */
    add(session) {
        if (!this.sessions.includes(session)) this.sessions.push(session);
        this._schedule(this._deps.settleMs ?? 20, true);
    }

    /** Removes a session (its tabs left): a new stream without it, or none when it was the last. */
    remove(session) {
        this._drop(session);
        if (this.isEmpty) this.close();
        else this._schedule(this._deps.settleMs ?? 20);
    }

    /**
     * Forgets a session the server already ended on this stream: no new stream for it (the next one
     * leaves it out); the connection closes when it was the last.
     */
    forget(session) {
        this._drop(session);
        if (this.isEmpty) this.close();
    }

    /** A new stream with the same list (a session must start over from the hub's position). */
    refresh() {
        this._schedule(this._deps.settleMs ?? 20, true);
    }

    /** The server is going away (`end` `shutdown`): closes, and opens again after a backoff delay. */
    restart() {
        const list = this._current?.list ?? this._pending?.list ?? this.sessions;
        this._closeSources();
        this._failures += 1;
        this._deps.onState([...list], "reconnecting");
        this._schedule(this._deps.backoffDelay(this._failures), true);
    }

    /** Listens for `name` on the streams open now (new streams listen to every known name). */
    listen(name) {
        for (const entry of [this._current, this._pending]) if (entry) this._listen(entry, name);
    }

    /** Closes every stream for good. */
    close() {
        clearTimeout(this._timer);
        this._timer = null;
        this._closeSources();
    }

    _drop(session) {
        const i = this.sessions.indexOf(session);
        if (i >= 0) this.sessions.splice(i, 1);
    }

    _schedule(ms, force = false) {
        if (force) this._force = true;
        clearTimeout(this._timer);
        this._timer = setTimeout(() => this._open(), ms);
    }

    /** Opens a stream for the current list, unless the open one already carries exactly that list. */
    _open() {
        this._timer = null;
        const force = this._force;
        this._force = false;
        const list = [...this.sessions];
        if (list.length === 0) return this._closeSources();
        if (!force && this._pending && sameList(this._pending.list, list)) return;
        if (!force && !this._pending && this._current && sameList(this._current.list, list)) return;
        this._closeEntry(this._pending);
        this._pending = null;
        const { eventsUrl, position, names } = this._deps;
        const items = list.map((id) => {
            const last = position(id);
            return last === null || last === undefined ? id : `${id}:${last}`;
        });
        const source = new this._deps.EventSource(`${eventsUrl}?sessions=${items.join(",")}`);
        const entry = { source, list, names: new Set() };
        this._pending = entry;
        source.addEventListener("open", () => this._opened(entry));
        source.addEventListener("error", () => this._error(entry));
        for (const name of FIXED_NAMES) this._listen(entry, name);
        for (const name of names()) this._listen(entry, name);
        if (!this._current) this._deps.onState(list, this._failures > 0 ? "reconnecting" : "connecting");
    }

    _listen(entry, name) {
        if (entry.names.has(name)) return;
        entry.names.add(name);
        entry.source.addEventListener(name, (event) => {
            if (entry !== this._current && entry !== this._pending) return; // closed meanwhile
            const data = parseData(event);
            if (data && typeof data.session === "string") this._deps.onFrame(name, data, this);
        });
    }

    /** A stream opened (every session attached): the new one replaces the old, which is closed now. */
    _opened(entry) {
        if (entry === this._pending) {
            this._closeEntry(this._current);
            this._current = entry;
            this._pending = null;
        } else if (entry !== this._current) {
            return;
        }
        this._failures = 0;
        this._deps.onState([...entry.list], "open");
    }

    /** A stream the browser reconnects by itself (`CONNECTING`), or one it gave up on (`CLOSED`). */
    _error(entry) {
        if (entry !== this._current && entry !== this._pending) return;
        if (entry.source.readyState !== 2) {
            if (entry === this._current || !this._current) this._deps.onState([...entry.list], "reconnecting");
            return;
        }
        this._closeEntry(entry);
        if (entry === this._current) this._current = null;
        else this._pending = null;
        this._failures += 1;
        this._deps.onFailed([...entry.list]);
        if (!this._current) this._deps.onState([...entry.list], "reconnecting");
        this._schedule(this._deps.backoffDelay(this._failures), true);
    }

    _closeSources() {
        this._closeEntry(this._current);
        this._closeEntry(this._pending);
        this._current = null;
        this._pending = null;
    }

    _closeEntry(entry) {
        entry?.source.close();
    }
}

function sameList(a, b) {
    return a.length === b.length && a.every((id, i) => id === b[i]);
}

function parseData(event) {
    try {
        return JSON.parse(event.data);
    } catch {
        console.error("bff-client: an event's data is not JSON", event.type);
        return null;
    }
}
