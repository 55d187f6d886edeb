// stream-hub.js — the owner of a browser's event-stream connection: which tab shows which session, one
// multiplexed stream for all of them, and each session's events handed to its tabs once.
//
// One job: membership and routing. Tabs join with their session and the last seq they applied, and
// leave; the hub keeps the sessions on one `MuxConnection` (a new one only past `sessionsPerStream`,
// the server's default limit), applies each (session, seq) once (the old and the new stream overlap
// while a tab opens or closes), and sends a tab only its own session's events, its connection state,
// and `failed` when the stream was refused (the tab then checks whether its session still exists). It
// knows nothing of how messages reach a tab: `post` is a MessagePort in the SharedWorker
// (stream-worker.js) and a BroadcastChannel in the elected tab (stream-election.js). Runs there only.
import { MuxConnection } from "./mux-connection.js";

/** The server's default `--max-sessions-per-stream`. */
export const SESSIONS_PER_STREAM = 32;

export class StreamHub {
    /**
     * @param {object} deps
     * @param {string} deps.eventsUrl                        absolute URL of `/api/events`
     * @param {(tab: string, message: object) => void} deps.post  a message to one tab
     * @param {typeof EventSource} deps.EventSource
     * @param {(attempt: number) => number} deps.backoffDelay
     * @param {number} [deps.sessionsPerStream]
     */
    constructor(deps) {
        this._deps = deps;
        this._tabs = new Map(); // tab -> {session, waiting: no snapshot handed to it yet (it has none)}
        this._sessions = new Map(); // session -> {tabs: Set, pos: number|null, conn}
        this._conns = [];
        this._names = new Set(); // view-model event names (learned from snapshots and joins)
    }

    /** The number of tabs joined (diagnostics). */
    get tabCount() {
        return this._tabs.size;
    }

    /**
     * A tab shows `session` and has applied its events up to `seq` (-1: none, it needs a snapshot);
     * `names` are the view models it listens to. A tab that joins again (a new owner asked, or it was
     * paused) resumes from `seq`.
     */
    join(tab, { session, seq, names }) {
        if (typeof tab !== "string" || typeof session !== "string") return;
        for (const name of names ?? []) this._learn(name);
        if (this._tabs.has(tab) && this._tabs.get(tab).session !== session) this.leave(tab);
        const known = Number.isInteger(seq) && seq >= 0 ? seq : null;
        this._tabs.set(tab, { session, waiting: known === null });
        let member = this._sessions.get(session);
        if (!member) {
            member = { tabs: new Set([tab]), pos: known, conn: this._connWithRoom() };
            this._sessions.set(session, member);
            member.conn.add(session);
        } else {
            member.tabs.add(tab);
            // A tab behind the others (or new: no seq) resumes where it is: the stream starts the
            // session over from there; the tabs ahead drop what they have already applied.
            if (known === null || (member.pos !== null && known < member.pos)) {
                member.pos = known;
                member.conn.refresh();
            }
        }
        this._deps.post(tab, { type: "state", state: member.conn.isOpenWith(session) ? "open" : "connecting" });
    }

    /** A tab closed, was paused or moved to another session. */
    leave(tab) {
        const session = this._tabs.get(tab)?.session;
        if (session === undefined) return;
        this._tabs.delete(tab);
        const member = this._sessions.get(session);
        if (!member) return;
        member.tabs.delete(tab);
        if (member.tabs.size > 0) return;
        this._sessions.delete(session);
        member.conn.remove(session);
        this._dropIfEmpty(member.conn);
    }

    /** Closes every stream (the owner is going away); tabs join the next owner. */
    stop() {
        for (const conn of this._conns) conn.close();
        this._conns = [];
        this._sessions.clear();
        this._tabs.clear();
    }

    _connWithRoom() {
        const limit = this._deps.sessionsPerStream ?? SESSIONS_PER_STREAM;
        let conn = this._conns.find((c) => c.sessions.length < limit);
        if (conn) return conn;
        conn = new MuxConnection({
            eventsUrl: this._deps.eventsUrl, EventSource: this._deps.EventSource,
            backoffDelay: this._deps.backoffDelay,
            names: () => this._names,
            position: (session) => this._sessions.get(session)?.pos ?? null,
            onFrame: (name, data, from) => this._frame(name, data, from),
            onState: (sessions, state) => this._tell(sessions, { type: "state", state }),
            onFailed: (sessions) => this._tell(sessions, { type: "failed" }),
        });
        this._conns.push(conn);
        return conn;
    }

    _dropIfEmpty(conn) {
        if (!conn.isEmpty) return;
        conn.close();
        this._conns = this._conns.filter((c) => c !== conn);
    }

    _learn(name) {
        if (typeof name !== "string" || this._names.has(name)) return;
        this._names.add(name);
        for (const conn of this._conns) conn.listen(name);
    }

    /**
     * One event of the stream. Each (session, seq) goes to the session's tabs once: a view-model event
     * at or below the session's position was already handed on (the other stream of an overlap), and a
     * snapshot older than it would take the tabs back. `end` goes to the tabs and the session leaves
     * (its tabs join again with their next session), except `shutdown`: the server is going away, so
     * the connection starts over (a replay from each session's position).
     */
    _frame(name, data, conn) {
        const session = data.session;
        const member = this._sessions.get(session);
        if (!member || member.conn !== conn) return; // not (or no longer) a session of this connection
        if (name === "end") {
            if (data.reason === "shutdown") return conn.restart();
            this._sessions.delete(session);
            conn.forget(session);
            this._dropIfEmpty(conn);
            for (const tab of member.tabs) {
                this._tabs.delete(tab);
                this._deps.post(tab, { type: "event", name, data });
            }
            return;
        }
        const seq = data.seq;
        if (!Number.isInteger(seq)) {
            // Cluster mode's shared `status`: no seq (not an event of the session); every tab takes it.
            if (name !== "status") return;
            for (const tab of member.tabs) {
                if (!this._tabs.get(tab)?.waiting) this._deps.post(tab, { type: "event", name, data });
            }
            return;
        }
        if (name === "snapshot") {
            if (member.pos !== null && seq < member.pos) return;
            for (const viewModel of Object.keys(data.viewModels ?? {})) this._learn(viewModel);
        } else if (member.pos !== null && seq <= member.pos) {
            return;
        }
        member.pos = seq;
        for (const tab of member.tabs) {
            const joined = this._tabs.get(tab);
            if (joined?.waiting) {
                if (name !== "snapshot") continue; // a tab that has nothing starts with a snapshot
                joined.waiting = false;
            }
            this._deps.post(tab, { type: "event", name, data });
        }
    }

    _tell(sessions, message) {
        for (const session of sessions) {
            const member = this._sessions.get(session);
            if (member) for (const tab of member.tabs) this._deps.post(tab, message);
        }
    }
}
