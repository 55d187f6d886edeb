import EventHTTP
import JSON
import ViewModels

/// The session layer's state on one event loop: the sessions it owns, the streams whose
/// connections it hosts, a copy of the app-wide view models' outputs, and the loop's timers
/// (keep-alive comments, idle expiry, catch-up of streams that fell behind).
///
/// Threading: everything mutable here is used on `loop` only, and that is checked: it lives in a
/// `LoopBound`, which traps when opened on any other thread (so the class is `Sendable` without
/// `@unchecked`). Other loops reach it with `loop.execute` / `loop.runOrExecute`.
final class LoopSessions: Sendable {
    let env: SessionEnvironment
    let loop: EventLoop
    /// The sessions above as other loops read them (no hop for `GET /state`).
    let directory: SessionDirectory
    /// Runs work on `loop`: the executor of every view model of the sessions here (one closure per
    /// loop, not one per session).
    let executor: OwnerExecutor
    /// The loop-owned state behind the properties below.
    private let state: LoopBound<State>

    /// Everything mutable, owned by `loop`.
    private struct State {
        var sessions: [String: Session] = [:]
        /// The streams whose connections this loop hosts, each at its `hostedIndex` (a word a stream
        /// instead of a dictionary's bucket; removal swaps the last one in).
        var hosted: [any HostedStream] = []
        var behind: [ObjectIdentifier: any HostedStream] = [:]
        var behindTimer: LoopTimer?
        var timers: [LoopTimer] = []
        var appWide: JSONObject
        var retired = RetiredList()
        /// The last notice to sessions that also holds for sessions started after it (e.g. GitHub's
        /// rate-limit block), if it still stands: a new session's view models receive it at once.
        var standingNotice: (any Sendable)?
    }

    /// The sessions this loop owns, by id (loop only).
    var sessions: [String: Session] {
        _read { yield state.value.sessions }
        _modify { yield &state.value.sessions }
    }
    /// The app-wide view models' outputs as this loop last heard them, by view model name in registration
    /// order (`{name: {output: value}}`; loop only).
    var appWide: JSONObject {
        _read { yield state.value.appWide }
        _modify { yield &state.value.appWide }
    }
    /// Handles and snapshots this loop swapped out, released once no loop is reading them (loop only).
    var retired: RetiredList {
        _read { yield state.value.retired }
        _modify { yield &state.value.retired }
    }
    private var hosted: [any HostedStream] {
        _read { yield state.value.hosted }
        _modify { yield &state.value.hosted }
    }
    private var behind: [ObjectIdentifier: any HostedStream] {
        _read { yield state.value.behind }
        _modify { yield &state.value.behind }
    }
    private var behindTimer: LoopTimer? {
        _read { yield state.value.behindTimer }
        _modify { yield &state.value.behindTimer }
    }
    private var timers: [LoopTimer] {
        _read { yield state.value.timers }
        _modify { yield &state.value.timers }
    }

    init(env: SessionEnvironment, loop: EventLoop, appWide: JSONObject) {
        self.env = env
        self.loop = loop
        executor = { work in loop.execute(work) }
        self.state = LoopBound(State(appWide: appWide), loop: loop)
        directory = SessionDirectory(sessions: env.configuration.maxSessions)
    }

    /// Adds a new session (owner loop). A session that starts while a notice stands (a rate limit)
    /// receives it at once, so its `search` does not offer a search the app would refuse.
    func add(_ session: Session) {
        sessions[session.id] = session
        directory.insert(session.handle)
        if let notice = state.value.standingNotice {
            for vm in session.viewModels { vm.receive(notice) }
        }
    }

    /// An application-wide notice (`ViewModel.receive`): every session's view models apply what it means
    /// for them (loop only). `standing`: sessions started later receive it too, until the next notice.
    func noticed(_ notice: any Sendable, standing: Bool) {
        state.value.standingNotice = standing ? notice : nil
        for s in sessions.values {
            for vm in s.viewModels { vm.receive(notice) }
        }
    }

    /// Hands `notice` to the view models of every session of the login `key` names (on the loop).
    func noticed(_ notice: any Sendable, login key: String) {
        for s in sessions.values where s.login == key {
            for vm in s.viewModels { vm.receive(notice) }
        }
    }

    /// Ends every session of the login `key` names (`signed-out`), on the loop.
    func endSessions(ofLogin key: String) {
        for (id, s) in sessions where s.login == key { remove(id, reason: "signed-out") }
    }

    /// Starts the loop's timers (on the loop).
    func startTimers() {
        let c = env.configuration
        timers.append(
            loop.scheduleRepeating(every: c.keepAliveInterval / Double(SSEResponse.keepAliveTicksPerInterval)) {
                [unowned self] in
                for s in self.hosted { s.keepAliveTick() }
            })
        timers.append(
            loop.scheduleRepeating(every: max(0.05, min(5, c.sessionIdleTimeout / 4))) { [unowned self] in
                self.expireIdleSessions()
                self.retired.reclaim(domain: self.env.hazards)
            })
        timers.append(lagProbe())
    }

    /// How late the loop runs its timers (`bff_event_loop_lag_seconds`): a timer due every 0.5 s measures how
    /// long after its time it ran. A loop stalled by a long callback or starved of CPU is late for every
    /// deadline it keeps (lease renewals, Redis time-outs, keep-alives); over 1 s it is logged (at most every
    /// 10 s per loop), so a lost lease or a time-out can be told apart from a slow Redis.
    private func lagProbe() -> LoopTimer {
        var loggedAt: UInt64 = 0
        let index = loop.index
        let env = env
        // The loop keeps the late readings too: its Redis connections do not count time in which it could
        // not run as Redis's silence (`EventLoop.lateness(since:)`).
        return loop.startLagProbe(every: 0.5) { late in
            env.metrics.loopLag.recordSeconds(late)
            let now = monotonicNanos()
            if late >= 1, now &- loggedAt >= 10_000_000_000 {
                loggedAt = now
                env.logger.warning(
                    "event loop ran its timers late", metadata: ["loop": "\(index)", "seconds": "\(late)"])
            }
        }
    }

    func stopTimers() {
        for timer in timers { timer.cancel() }
        timers = []
        behindTimer?.cancel()
        behindTimer = nil
    }

    // MARK: sessions

    /// Ends the sessions with no stream that saw no request for the idle time-out (`expired`), or, never
    /// used (no input, no stream), the unused time-out after they started here, however often they were
    /// read (`unused`); every session forgets its expired idempotency keys (`Session.forgetExpiredKeys`).
    func expireIdleSessions() {
        let now = env.now()
        let (idle, unused) = (env.configuration.sessionIdleTimeout, env.configuration.unusedSessionTimeout)
        for (id, s) in sessions {
            s.forgetExpiredKeys(now: now)
            guard s.streams.isEmpty else { continue }
            let quiet = now - s.lastActivity
            if quiet >= idle {
                remove(id, reason: "expired")
            } else if !s.used, now - s.startedAt >= unused {
                remove(id, reason: "unused")
            }
        }
    }

    /// Ends and forgets a session.
    func remove(_ id: String, reason: String) {
        guard let s = sessions.removeValue(forKey: id) else { return }
        s.end(reason: reason)
        directory.remove(s.handle, retired: &retired, domain: env.hazards)
        env.sessionEnded(reason: reason, client: s.countedClient)
    }

    /// A stream of session `id` closed on its host loop.
    func streamClosed(_ stream: LoopBoundReference<any SessionEventSink>, sessionID id: String) {
        guard let s = sessions[id] else { return }
        s.streams.removeAll { $0.isSame(as: stream) }
        s.lastActivity = env.now()  // the idle clock starts when the last stream goes
    }

    /// App-wide view model `name` changed: update this loop's copy and let `backend` bring the event to
    /// the sessions and streams here (encoded once per loop, not once per session).
    func appWideChanged(_ name: String, _ event: ViewModelEvent, backend: any SessionBackend) {
        var outputs = appWide[name]?.objectValue ?? [:]
        outputs.merge(event.outputs)
        appWide[name] = .object(outputs)
        backend.appWideChanged(name, Session.eventData(event), isSignal: !event.signals.isEmpty, on: self)
    }

    /// Every session here emits app-wide view model `name`'s event `data` (a session event, numbered in
    /// its `seq`).
    func emitInEverySession(_ name: String, _ data: [UInt8], isSignal: Bool) {
        for s in sessions.values { s.emit(viewModel: name, data: data, isSignal: isSignal) }
    }

    /// Every stream hosted here gets `frame` for each of its sessions, as a state frame (coalesced when
    /// the stream is behind).
    func broadcastToHostedStreams(_ frame: [UInt8]) {
        for s in hosted { s.broadcast(frame) }
    }

    /// The app-wide view models' current outputs as events without an id, one per view model: what a
    /// stream resumed from a replay gets after it, where they are not part of the sessions' history
    /// (cluster mode).
    var appWideFrames: [UInt8] {
        var out: [UInt8] = []
        for (name, outputs) in appWide.entries {
            let event = ViewModelEvent(inputSeq: nil, outputs: outputs.objectValue ?? [:], signals: [:])
            out += SSEFrame.event(id: nil, name: name, data: Session.eventData(event))
        }
        return out
    }

    // MARK: hosted streams

    func register(_ s: any HostedStream) {
        guard s.hostedIndex < 0 else { return }
        s.hostedIndex = Int32(hosted.count)
        hosted.append(s)
        env.metrics.streams.increment()
    }

    func unregister(_ s: any HostedStream) {
        guard s.hostedIndex >= 0 else { return }
        let i = Int(s.hostedIndex)
        let last = hosted.removeLast()
        if i < hosted.count {
            hosted[i] = last
            last.hostedIndex = Int32(i)
        }
        s.hostedIndex = -1
        behind[ObjectIdentifier(s)] = nil
        env.metrics.streams.decrement()
    }

    func watchBehind(_ s: any HostedStream) {
        behind[ObjectIdentifier(s)] = s
        guard behindTimer == nil else { return }
        behindTimer = loop.scheduleRepeating(every: 0.02) { [unowned self] in
            for (key, s) in self.behind where s.checkDrained() { self.behind[key] = nil }
            if self.behind.isEmpty {
                self.behindTimer?.cancel()
                self.behindTimer = nil
            }
        }
    }

    /// Shutdown: every hosted stream gets `event: end` with reason `shutdown`.
    func endAllStreams() {
        let frame = SSEFrame.event(id: nil, name: "end", json: ["reason": "shutdown"])
        for s in hosted { s.shutdown(with: frame) }
        stopTimers()
    }
}
