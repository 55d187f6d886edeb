import CHiredis
import EventLoop
import Glibc
import Logging
import Primitives
import Synchronization

/// One asynchronous Redis connection (hiredis) attached to one `EventLoop`'s `event_base`.
///
/// Threading: loop-bound. `start()`, `send`, `close()`, the callbacks and every property except
/// `state` belong to `loop`'s thread (`start`, `send` and `close` trap anywhere else, like
/// SwiftNIO's `NIOLoopBound`); every callback runs there. `state` may be read from any
/// thread; the `async` variants in `RedisConnection+Async.swift` hop to the loop from anywhere.
///
/// Behaviour:
/// - After each connect it sends `AUTH` (if the URL had a password), `SELECT` (if db ≠ 0) and
///   `PING`; the connection is `ready` when `PING` answers.
/// - Every command has its own time-out (hiredis 0.14 has none): a deadline, checked by one timer per
///   connection armed for the earliest deadline of the commands waiting (`checkDeadlines`; a timer per
///   command cost an allocation, `event_new`, `event_add` and `event_free` for every command, far more
///   than one per connection: docs/BENCHMARKS.md). On time-out the command alone fails with `.timeout`;
///   its late reply is dropped when it comes (replies come in order, matched by id). The commands behind
///   it keep waiting for their own replies and time-outs: one slow command never fails the others.
///   Neither a time-out nor a stall is declared while replies wait unread in the socket
///   (`chiredis_unread_bytes`): Redis answered, this loop was busy.
/// - A connection that makes no progress at all (no reply to anything) for a whole `stallTimeout` while
///   commands wait is *silent* (`isSilent`, `onSilence`; not ready for `/readyz`) and kept as long as the
///   kernel says Redis's host acknowledges what it is sent (`RedisPath`): Redis is slow or stopped, and a
///   new connection would only fail the commands waiting. It is dropped and re-made when the path is gone
///   (not established, or bytes sent again with no ACK for the limit), when it stays silent for
///   `RedisPath.keptSilenceLimits` limits (a proxy in front of a dead Redis acknowledges for it), or when the
///   socket fails. The first reply ends the silence.
/// - At most `configuration.maxInFlight` commands (timed-out ones whose reply has not come yet
///   included) are outstanding; past that `send` holds commands, in order, up to `maxQueued`, and writes
///   them as replies make room (a held command whose deadline passes fails with `.timeout`, never sent);
///   past both it fails at once with `.overloaded`, before anything is written (the caller answers
///   `503` + `Retry-After`).
/// - A lost connection fails its pending commands with `.connectionLost` and reconnects with
///   exponential back-off and jitter (`Backoff`). Commands are sent only while `ready`: otherwise
///   they fail at once with `.notConnected` (callers answer `503`), they are not queued.
// Unchecked: hiredis's callback context (`Unmanaged` in its C callbacks); loop-thread-only fields.
public final class RedisConnection: @unchecked Sendable {
    /// The completion of one command; runs on the connection's loop.
    public typealias Callback = (Result<RESPValue, RedisError>) -> Void

    /// The loop this connection lives on.
    public let loop: EventLoop
    /// Where it connects (the password is never logged).
    public let configuration: RedisConfiguration
    /// Called on the loop after every state change.
    public var onStateChange: ((RedisConnectionState) -> Void)?
    /// Called on the loop with each reply's round-trip time in seconds (for metrics).
    public var onRoundTrip: ((Double) -> Void)?
    /// Called on the loop for each time-out, refusal, silence and stall reset (for metrics).
    public var onEvent: ((RedisConnectionEvent) -> Void)?
    /// Seconds without any reply, while commands wait, after which the connection is silent (kept while
    /// Redis's host acknowledges, dropped and made again when its path is gone: `checkStall`); nil: the
    /// configuration's `commandTimeout`. A connection that runs blocking commands (`WAIT`)
    /// needs more than their blocking time. Loop thread only.
    public var stallTimeout: Double?

    private let logger: Logger
    private let backoff: Backoff
    private let stateValue = Atomic<UInt8>(RedisConnectionState.connecting.rawValue)
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var pending: [UInt: Pending] = [:]
    private var nextID: UInt = 1
    private var attempt = 0
    private var reconnectTimer: LoopTimer?
    private var isClosed = false
    /// Seconds between health checks while `ready` (nil: none); set before `start()`.
    public var healthCheckInterval: Double?
    private var healthTimer: LoopTimer?
    private var lastReplyAt: UInt64 = 0
    /// Called on the loop when the connection falls silent (`true`) and when Redis answers it again
    /// (`false`); not when it is dropped (`onStateChange` tells that).
    public var onSilence: ((Bool) -> Void)?
    private let silentValue = Atomic<Bool>(false)
    /// Commands wait and nothing was answered for a whole stall limit, on a path whose host still
    /// acknowledges (`checkStall`): kept, not ready. Any thread.
    public var isSilent: Bool { silentValue.load(ordering: .relaxed) }
    /// `ready` and not silent: what `/readyz` counts as connected. Any thread.
    public var isAnswering: Bool { state == .ready && !isSilent }
    /// A `PING` written as a probe during a silence waits for its reply.
    private var probing = false
    /// Commands written whose reply has not come: live ones (in `pending`, not persistent) and timed-out
    /// ones (`abandoned`), which still hold their place in Redis's reply order.
    public private(set) var inFlight = 0
    /// Ids of commands that timed out before their reply came (the reply is dropped when it does).
    private var abandoned: Set<UInt> = []
    /// When `inFlight` last went from 0 to 1: progress is measured from this or the last reply.
    private var busySince: UInt64 = 0
    private var stallTimer: LoopTimer?
    /// The progress mark (`max(lastReplyAt, busySince)`) when a pause's grace last put off a stall reset.
    private var stallGracedAt: UInt64 = 0
    /// The timer of `checkDeadlines`, armed for `deadlineTimerAt` (monotonic ns), the earliest deadline
    /// of a waiting command when it was armed; nil when none is armed.
    private var deadlineTimer: LoopTimer?
    private var deadlineTimerAt: UInt64 = 0
    /// Ids of the commands sent with a deadline, in the order sent; some may be answered already (dropped
    /// by the next check, or all at once whenever none with a deadline waits: `timedWaiting`). Only these
    /// are looked at by a check, not every subscription's entry in `pending`.
    private var timed: [UInt] = []
    /// Commands in `pending` with a deadline.
    private var timedWaiting = 0
    /// A flush of the commands queued in this loop iteration is queued (`loop.runSoon`): they are
    /// written once the iteration's callbacks are done (one `write`). hiredis's own way arms the
    /// socket's write event, waits for `epoll_wait` to report it writable, writes and disarms it: a loop
    /// iteration and two `epoll_ctl` calls per command (with the base's epoll changelist, arming and
    /// disarming within one iteration cancel out).
    private var flushQueued = false

    /// Commands asked for while `maxInFlight` were outstanding, from `heldHead` on, in order (see `send`).
    private var held: [Held] = []
    private var heldHead = 0

    private struct Held {
        let args: [RedisArg]
        var deadline: UInt64
        /// The time-out it was asked with, in seconds, and whether a pause's grace moved its deadline once.
        let timeout: Double
        var graced = false
        let callback: Callback
    }

    /// What waits on this connection: commands outstanding and commands held for room. Loop thread only.
    public var waiting: Int { inFlight + held.count - heldHead }

    private struct Pending {
        var callback: Callback
        var sentAt: UInt64
        /// When it times out (monotonic ns; 0: never) and the time-out it was given, in seconds.
        var deadline: UInt64
        var timeout: Double
        /// Subscription callbacks stay registered after their first reply.
        var persistent: Bool
        /// Its deadline was moved once by a pause's grace (`UnreadReplies.pauseGrace`).
        var graced = false
    }

    /// A connection to `configuration` on `loop`; call `start()` on the loop to connect.
    public init(loop: EventLoop, configuration: RedisConfiguration, logger: Logger = Logger(label: "redis")) {
        self.loop = loop
        self.configuration = configuration
        self.logger = logger
        backoff = Backoff(base: configuration.reconnectBase, max: configuration.reconnectMax)
    }

    /// The current state. Safe from any thread.
    public var state: RedisConnectionState {
        RedisConnectionState(rawValue: stateValue.load(ordering: .acquiring)) ?? .closed
    }

    /// Starts connecting (and reconnecting whenever the connection is lost). Loop thread only.
    public func start() {
        precondition(loop.inEventLoop, "RedisConnection.start off its loop")
        guard !isClosed, context == nil, reconnectTimer == nil else { return }
        connect()
    }

    /// Closes the connection for good: pending commands fail with `.connectionLost`. Loop thread only.
    public func close() {
        precondition(loop.inEventLoop, "RedisConnection.close off its loop")
        guard !isClosed else { return }
        isClosed = true
        reconnectTimer?.cancel()
        reconnectTimer = nil
        dropContext(reason: "closed", reconnect: false)
        setState(.closed)
    }

    /// Sends one command; `callback` gets its reply on the loop. `timeout` defaults to the
    /// configuration's `commandTimeout`. A top-level error reply is `.failure(.server(message))`.
    /// Loop thread only.
    public func send(_ args: [RedisArg], timeout: Double? = nil, _ callback: @escaping Callback) {
        precondition(loop.inEventLoop, "RedisConnection.send off its loop")
        guard state == .ready else { return callback(.failure(.notConnected)) }
        let timeout = timeout ?? configuration.commandTimeout
        if inFlight < configuration.maxInFlight, heldHead == held.count {
            issue(args, timeout: timeout, persistent: false, callback)
            return
        }
        guard held.count - heldHead < configuration.maxQueued else {
            onEvent?(.refused)
            return callback(.failure(.overloaded))
        }
        let deadline = monotonicNanos() &+ UInt64(max(0, timeout) * 1e9)
        held.append(Held(args: args, deadline: deadline, timeout: timeout, callback: callback))
        armDeadlineCheck(at: deadline)
    }

    /// Writes held commands, in order, while there is room; one whose deadline passed fails with
    /// `.timeout` instead (it was never sent).
    private func sendHeld() {
        let now = monotonicNanos()
        while heldHead < held.count, inFlight < configuration.maxInFlight, context != nil {
            var h = held[heldHead]
            heldHead += 1
            if isExpired(&h, now: now) {
                onEvent?(.timedOut)
                h.callback(.failure(.timeout))
            } else {
                issue(h.args, timeout: Double(h.deadline - now) / 1e9, persistent: false, h.callback)
            }
        }
        compactHeld()
    }

    /// True when held command `h`'s deadline has passed. One found a grace or more past it (the loop, or
    /// the host, was paused, or its lag probe found the loop late while it waited: `UnreadReplies.pauseGrace`)
    /// gets its deadline moved by that grace, once.
    private func isExpired(_ h: inout Held, now: UInt64) -> Bool {
        guard h.deadline <= now else { return false }
        return !UnreadReplies.deferPastPause(
            &h.deadline, graced: &h.graced, limit: h.timeout, now: now, since: h.deadline &- UInt64(h.timeout * 1e9),
            loop: loop)
    }

    /// Drops the entries before `heldHead` once they are all gone or most of the array.
    private func compactHeld() {
        if heldHead == held.count {
            held.removeAll(keepingCapacity: true)
            heldHead = 0
        } else if heldHead > 64, heldHead * 2 > held.count {
            held.removeFirst(heldHead)
            heldHead = 0
        }
    }

    /// Drops the connection and reconnects (pending commands fail with `.connectionLost`). For a
    /// subscriber, whose idle connection cannot notice a Redis that stopped answering (hiredis 0.14
    /// cannot `PING` in subscribe mode): reset it when the command connection of the same loop
    /// times out. Loop thread only.
    public func reconnect() {
        precondition(loop.inEventLoop, "RedisConnection.reconnect off its loop")
        guard !isClosed else { return }
        dropContext(reason: "reconnect requested", reconnect: true)
    }

    /// Sends a (P)SUBSCRIBE whose callback receives every later message for it, until the
    /// connection is lost (then it gets `.failure(.connectionLost)` once). Used by `RedisSubscriber`.
    func sendPersistent(_ args: [RedisArg], _ callback: @escaping Callback) -> UInt? {
        guard state == .ready else {
            callback(.failure(.notConnected))
            return nil
        }
        return issue(args, timeout: nil, persistent: true, callback)
    }

    /// Sends a command that has no reply of its own ((P)UNSUBSCRIBE: the channel's callback gets it).
    func sendWithoutReply(_ args: [RedisArg]) {
        guard let ctx = context else { return }
        _ = append(args, to: ctx, withReply: false, id: 0)
    }

    /// Forgets a persistent callback (after its unsubscribe confirmation).
    func forget(_ id: UInt) { pending[id] = nil }

    // MARK: Connecting

    private func connect() {
        reconnectTimer = nil
        setState(.connecting)
        guard let ctx = redisAsyncConnect(configuration.host, Int32(configuration.port)) else {
            scheduleReconnect(reason: "redisAsyncConnect returned NULL")
            return
        }
        if ctx.pointee.err != 0 {
            let why = ctx.pointee.errstr.map { String(cString: $0) } ?? "error \(ctx.pointee.err)"
            redisAsyncFree(ctx)
            scheduleReconnect(reason: why)
            return
        }
        // The context holds a reference to the connection until `contextGone` clears `data`.
        ctx.pointee.data = Unmanaged.passRetained(self).toOpaque()
        context = ctx
        guard chiredis_attach(ctx, loop.base) == REDIS_OK else {
            dropContext(reason: "attaching to the event loop failed", reconnect: true)
            return
        }
        redisAsyncSetConnectCallback(ctx, redisConnectCallback)
        redisAsyncSetDisconnectCallback(ctx, redisDisconnectCallback)
        let t = configuration.connectTimeout
        if let password = configuration.password {
            issue(["AUTH", RedisArg(password)], timeout: t, persistent: false) { [weak self] r in
                if case .failure(let e) = r { self?.handshakeFailed("AUTH", e) }
            }
        }
        if configuration.database != 0 {
            issue(["SELECT", RedisArg(configuration.database)], timeout: t, persistent: false) { [weak self] r in
                if case .failure(let e) = r { self?.handshakeFailed("SELECT", e) }
            }
        }
        issue(["PING"], timeout: t, persistent: false) { [weak self] r in
            guard let self, self.context == ctx else { return }
            // An error reply (`-LOADING` while a restarted Redis reads its data) is answered like a
            // failed hand-shake: reconnect later. Left alone, the connection stayed `connecting` for good.
            if case .failure(let e) = r { return self.handshakeFailed("PING", e) }
            self.attempt = 0
            self.logger.info("redis connected", metadata: ["redis": "\(self.configuration)"])
            self.setState(.ready)
        }
    }

    private func handshakeFailed(_ command: String, _ error: RedisError) {
        // `.server` only: time-outs and lost connections already drop the context themselves.
        guard case .server = error else { return }
        logger.error("redis \(command) failed", metadata: ["error": "\(error)"])
        dropContext(reason: "\(command) failed", reconnect: true)
    }

    private func scheduleReconnect(reason: String) {
        setState(isClosed ? .closed : .disconnected)
        guard !isClosed, reconnectTimer == nil else { return }
        let delay = backoff.delay(attempt: attempt)
        attempt += 1
        logger.warning(
            "redis connection down; reconnecting",
            metadata: ["redis": "\(configuration)", "reason": "\(reason)", "in": "\(delay)"])
        reconnectTimer = loop.schedule(after: delay) { [weak self] in self?.connect() }
    }

    /// Frees the current context (if any) ourselves: time-out, failed hand-shake, `close()`.
    private func dropContext(reason: String, reconnect: Bool) {
        guard let ctx = context else { return }
        contextGone(ctx, reason: reason, reconnect: reconnect)
        redisAsyncFree(ctx)  // its callbacks now see `data == nil` and do nothing
    }

    /// The context is going away (hiredis frees it, or we are about to): detach from it, fail
    /// everything pending, and reconnect unless closed. Idempotent per context.
    fileprivate func contextGone(_ ctx: UnsafeMutablePointer<redisAsyncContext>, reason: String, reconnect: Bool = true)
    {
        guard let data = ctx.pointee.data else { return }
        ctx.pointee.data = nil
        if context == ctx { context = nil }
        let failed = pending
        let failedHeld = held[heldHead...]
        held.removeAll()
        heldHead = 0
        pending.removeAll()
        abandoned.removeAll()
        timed.removeAll()
        timedWaiting = 0
        inFlight = 0
        probing = false
        silentValue.store(false, ordering: .relaxed)
        stallTimer?.cancel()
        stallTimer = nil
        deadlineTimer?.cancel()
        deadlineTimer = nil
        for (_, p) in failed.sorted(by: { $0.key < $1.key }) {
            p.callback(.failure(.connectionLost(reason)))
        }
        for h in failedHeld { h.callback(.failure(.connectionLost(reason))) }
        if reconnect { scheduleReconnect(reason: reason) }
        Unmanaged<RedisConnection>.fromOpaque(data).release()
    }

    private func setState(_ s: RedisConnectionState) {
        let old = stateValue.exchange(s.rawValue, ordering: .acquiringAndReleasing)
        guard old != s.rawValue else { return }
        healthTimer?.cancel()
        healthTimer = nil
        if s == .ready, let every = healthCheckInterval {
            lastReplyAt = monotonicNanos()
            healthTimer = loop.scheduleRepeating(every: every) { [weak self] in self?.checkHealth(every) }
        }
        onStateChange?(s)
    }

    /// While idle (nothing pending, no reply for `interval`), a `PING`: its time-out drops a connection
    /// to a Redis that stopped answering, which an idle connection would otherwise never notice.
    private func checkHealth(_ interval: Double) {
        guard state == .ready, inFlight == 0, Double(monotonicNanos() &- lastReplyAt) / 1e9 >= interval * 0.9 else {
            return
        }
        issue(["PING"], timeout: configuration.commandTimeout, persistent: false) { _ in }
    }

    // MARK: Commands

    @discardableResult
    private func issue(
        _ args: [RedisArg], timeout: Double?, persistent: Bool, _ callback: @escaping Callback
    ) -> UInt? {
        guard let ctx = context else {
            callback(.failure(.notConnected))
            return nil
        }
        let id = nextID
        nextID &+= 1
        guard append(args, to: ctx, withReply: true, id: id) == REDIS_OK else {
            callback(.failure(.connectionLost("redisAsyncFormattedCommand failed")))
            return nil
        }
        let now = monotonicNanos()
        let deadline = timeout.map { now &+ UInt64(max(0, $0) * 1e9) } ?? 0
        let p = Pending(
            callback: callback, sentAt: now, deadline: deadline, timeout: timeout ?? 0, persistent: persistent)
        if !persistent {
            if inFlight == 0 { busySince = p.sentAt }
            inFlight += 1
        }
        pending[id] = p
        if deadline != 0 {
            timed.append(id)
            timedWaiting += 1
            armDeadlineCheck(at: deadline)
        }
        return id
    }

    /// Queues `args` (RESP, `respCommand`) on `ctx`; with `withReply`, its reply reaches `handleReply`
    /// with `id`.
    private func append(
        _ args: [RedisArg], to ctx: UnsafeMutablePointer<redisAsyncContext>, withReply: Bool, id: UInt
    ) -> Int32 {
        let command = respCommand(args)
        let callback = withReply ? redisReplyCallback : nil
        let status = command.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { c in
                // The trailing NUL is not part of the command.
                redisAsyncFormattedCommand(
                    ctx, callback, UnsafeMutableRawPointer(bitPattern: id), c.baseAddress, c.count - 1)
            }
        }
        if status == REDIS_OK { scheduleFlush() }
        return status
    }

    /// Queues one flush per loop iteration (see `flushQueued`).
    private func scheduleFlush() {
        guard !flushQueued else { return }
        flushQueued = true
        loop.runSoon { [self] in flush() }
    }

    /// Writes what hiredis has queued, if the socket is connected (before that, hiredis's write event
    /// completes the connect and writes). A write error tears the context down as hiredis's own
    /// write callback would (`contextGone`).
    private func flush() {
        flushQueued = false
        guard let ctx = context, ctx.pointee.c.flags & REDIS_CONNECTED != 0 else { return }
        redisAsyncHandleWrite(ctx)
    }

    /// Makes sure the deadline check runs no later than `deadline`: a timer already armed for that time
    /// or sooner stays (the usual case: commands are answered in order, long before their deadlines).
    private func armDeadlineCheck(at deadline: UInt64) {
        if deadlineTimer != nil, deadlineTimerAt <= deadline { return }
        deadlineTimer?.cancel()
        deadlineTimerAt = deadline
        deadlineTimer = loop.schedule(atNanos: deadline) { [weak self] in self?.checkDeadlines() }
    }

    /// The commands whose deadline passed time out, in the order they were sent; the timer is armed again
    /// for the earliest deadline left. While Redis's replies wait unread in the socket (it has answered,
    /// this loop was busy), a passed deadline is looked at again after `UnreadReplies.recheckDelay`, once
    /// the read event had its turn (it runs before timers in a loop iteration). Bounded by what Redis sent.
    private func checkDeadlines() {
        deadlineTimer = nil
        let now = monotonicNanos()
        var due: [UInt] = []
        var next = UInt64.max
        let unread = UnreadReplies.waiting(on: context)
        var waiting: [UInt] = []  // `timed` without the answered ones
        var late = 0.0  // how long after its deadline the latest due command is judged
        for id in timed {
            guard var p = pending[id] else { continue }
            waiting.append(id)
            if p.deadline > now {
                next = min(next, p.deadline)
            } else if unread {
                let later = now &+ UInt64(UnreadReplies.recheckDelay(p.timeout) * 1e9)
                pending[id]?.deadline = later
                next = min(next, later)
            } else if UnreadReplies.deferPastPause(
                &p.deadline, graced: &p.graced, limit: p.timeout, now: now, since: p.sentAt, loop: loop)
            {
                pending[id] = p
                next = min(next, p.deadline)
            } else {
                due.append(id)
                late = max(late, UnreadReplies.secondsLate(p.deadline, now: now))
            }
        }
        timed = waiting
        var expired: [Held] = []
        if heldHead < held.count {
            var kept: [Held] = []
            for var h in held[heldHead...] {
                if isExpired(&h, now: now) {
                    expired.append(h)
                } else {
                    kept.append(h)
                    next = min(next, h.deadline)
                }
            }
            held = kept
            heldHead = 0
        }
        if next != .max { armDeadlineCheck(at: next) }
        for id in due.sorted() { timedOut(id, late: late) }
        for h in expired {
            onEvent?(.timedOut)
            h.callback(.failure(.timeout))
        }
    }

    /// `p` has left `pending` (answered or timed out).
    private func answered(_ p: Pending) {
        guard p.deadline != 0 else { return }
        timedWaiting -= 1
        if timedWaiting == 0 { timed.removeAll(keepingCapacity: true) }
    }

    /// One command's time-out, judged `late` seconds after its deadline: it alone fails, unless the
    /// connection made no progress at all for a whole `stallTimeout` (then it is dropped first, so the caller
    /// sees the new state).
    private func timedOut(_ id: UInt, late: Double) {
        guard let p = pending.removeValue(forKey: id) else { return }
        answered(p)
        abandoned.insert(id)
        onEvent?(.timedOut)
        if checkStall(late: late) == .fine { armStallCheck() }
        p.callback(.failure(.timeout))
    }

    /// Seconds since the connection last made progress: its last reply, or when it last got busy.
    private var secondsWithoutProgress: Double { Double(monotonicNanos() &- max(lastReplyAt, busySince)) / 1e9 }

    private enum StallVerdict { case fine, graced, dropped }

    /// Drops the connection when commands wait and nothing was answered for `stallTimeout`, judged `late`
    /// seconds after the check was due: after a pause (`UnreadReplies.pauseGrace`) the verdict waits a grace
    /// (`.graced`: the check is armed for then).
    private func checkStall(late: Double) -> StallVerdict {
        let limit = stallTimeout ?? configuration.commandTimeout
        guard inFlight > 0, context != nil, secondsWithoutProgress >= limit * 0.999 else { return .fine }
        guard !UnreadReplies.waiting(on: context) else { return .fine }  // replies wait to be read: progress
        let progress = max(lastReplyAt, busySince)
        if stallGracedAt != progress,
            let grace = UnreadReplies.pauseGrace(late: late, since: progress, loop: loop, limit: limit)
        {
            stallGracedAt = progress  // one grace until the connection makes progress again
            armStallCheck(after: grace)
            return .graced
        }
        // What an operator needs to tell a stuck Redis from a starved host or a cut link: how long it really
        // was silent, how much waited, how late this check ran (the loop's own pause), what TCP saw.
        func ms(_ seconds: Double) -> Int { Int((seconds * 1000).rounded()) }
        let starved = loop.lateness(since: progress)  // this loop's own stall within the silence
        let path = RedisPath.read(context)
        let detail =
            "no reply for \(limit) s while commands waited (\(inFlight) commands, silent \(ms(secondsWithoutProgress)) ms, "
            + "checked \(ms(late)) ms late, loop starved \(ms(starved)) ms; TCP: \(path?.description ?? "unknown"))"
        // Redis's host still acknowledges: Redis is slow or stopped, and a new connection would reach the same
        // Redis. Kept (its commands time out one by one) and looked at again after another limit.
        if RedisPath.keeps(path, silentFor: secondsWithoutProgress, limit: limit) {
            if path?.allAcknowledged ?? false, !probing {
                // Nothing left unacknowledged to show a path that breaks from now on: a PING will.
                probing = true
                issue(["PING"], timeout: nil, persistent: false) { [weak self] _ in self?.probing = false }
            }
            fallSilent(detail)
            armStallCheck(after: limit)
            return .graced
        }
        onEvent?(.stalled)
        dropContext(reason: detail, reconnect: true)
        return .dropped
    }

    private func fallSilent(_ detail: String) {
        guard !silentValue.exchange(true, ordering: .relaxed) else { return }
        logger.warning(
            "redis silent; its host acknowledges, connection kept",
            metadata: ["redis": "\(configuration)", "detail": "\(detail)"])
        onEvent?(.silent)
        onSilence?(true)
    }

    /// A reply came: progress, and the end of a silence.
    private func heard() {
        let now = monotonicNanos()
        if isSilent {  // written on this loop only: a plain load on every reply, a store once per silence
            silentValue.store(false, ordering: .relaxed)
            let seconds = Double(now &- max(lastReplyAt, busySince)) / 1e9
            logger.notice(
                "redis answers again",
                metadata: ["redis": "\(configuration)", "silent": "\(Int((seconds * 1000).rounded())) ms"])
            onSilence?(false)
        }
        lastReplyAt = now
    }

    /// After a time-out that did not drop the connection: checks again when the stall limit would be
    /// reached (or after `wait`), so that a connection whose every waiting command has timed out is still
    /// reset if stuck.
    private func armStallCheck(after wait: Double? = nil) {
        stallTimer?.cancel()
        stallTimer = nil
        guard inFlight > 0 else { return }
        let limit = stallTimeout ?? configuration.commandTimeout
        let wait = wait ?? max(0.001, limit - secondsWithoutProgress)
        let due = monotonicNanos() &+ UInt64(wait * 1e9)
        stallTimer = loop.schedule(after: wait) { [weak self] in
            guard let self else { return }
            self.stallTimer = nil
            if self.checkStall(late: UnreadReplies.secondsLate(due, now: monotonicNanos())) == .fine {
                self.armStallCheck()
            }
        }
    }

    fileprivate func handleReply(
        _ ctx: UnsafeMutablePointer<redisAsyncContext>, _ reply: UnsafeMutableRawPointer?, id: UInt
    ) {
        guard let reply else {
            // hiredis is tearing the context down: `contextGone` fails everything at once.
            return
        }
        guard let p = pending[id] else {
            if abandoned.remove(id) != nil {  // timed out: the late reply is dropped, but it is progress
                heard()
                inFlight -= 1
                if heldHead < held.count { sendHeld() }
            }
            return
        }
        heard()
        let value = RESPValue(reply: reply.assumingMemoryBound(to: redisReply.self))
        if !p.persistent {
            pending[id] = nil
            inFlight -= 1
            answered(p)
            let rtt = Double(monotonicNanos() &- p.sentAt) / 1e9
            onRoundTrip?(rtt)
        }
        if case .error(let message) = value {
            p.callback(.failure(.server(message)))
        } else {
            p.callback(.success(value))
        }
        if heldHead < held.count { sendHeld() }
    }
}

/// `args` as one RESP command (`*N`, then `$len` and the bytes of each argument), the form hiredis
/// would build; handed to `redisAsyncFormattedCommand`. Written here in one reserved buffer: hiredis's own
/// formatting (`redisAsyncCommandArgv`: an argv copy, then `sdscatfmt` per argument) and a key path in
/// the argv copy were a large share of a cluster node's work per input (docs/BENCHMARKS.md).
/// A NUL byte follows the command (not part of it, not counted by callers): hiredis scans the arguments
/// of (un)subscribe commands with `strchr`, which stops only at a NUL (its own formatter leaves one there).
func respCommand(_ args: [RedisArg]) -> [UInt8] {
    // The exact size first, then every byte written in place: one allocation, no per-byte appends
    // (appending byte by byte made a commit's command costly to build: docs/BENCHMARKS.md).
    var size = 1 + decimalDigits(UInt(args.count)) + 2 + 1
    for a in args { size += 1 + decimalDigits(UInt(a.bytes.count)) + 2 + a.bytes.count + 2 }
    return bytesWritten(count: size) { buffer in
        var at = 0
        func line(_ marker: UInt8, _ n: Int) {  // marker, decimal n (n >= 0), CRLF
            buffer[at] = marker
            let end = at + 1 + decimalDigits(UInt(n))
            writeDecimal(UInt(n), into: buffer, endingAt: end)
            buffer[end] = 13
            buffer[end + 1] = 10
            at = end + 2
        }
        line(UInt8(ascii: "*"), args.count)
        for a in args {
            line(UInt8(ascii: "$"), a.bytes.count)
            a.bytes.withUnsafeBufferPointer { src in
                if let base = src.baseAddress, src.count > 0 {
                    (buffer.baseAddress! + at).update(from: base, count: src.count)
                }
            }
            at += a.bytes.count
            buffer[at] = 13
            buffer[at + 1] = 10
            at += 2
        }
        buffer[at] = 0
        return at + 1
    }
}

private func connection(_ ctx: UnsafePointer<redisAsyncContext>?) -> RedisConnection? {
    guard let data = ctx?.pointee.data else { return nil }
    return Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue()
}

private let redisReplyCallback:
    @convention(c) (
        UnsafeMutablePointer<redisAsyncContext>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?
    ) -> Void = { ctx, reply, privdata in
        guard let ctx, let conn = connection(ctx) else { return }
        conn.handleReply(ctx, reply, id: UInt(bitPattern: privdata))
    }

private let redisConnectCallback: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = { ctx, status in
    guard status != REDIS_OK, let ctx, let conn = connection(ctx) else { return }
    let why = ctx.pointee.errstr.map { String(cString: $0) } ?? "connect failed"
    conn.contextGone(UnsafeMutablePointer(mutating: ctx), reason: why)
}

private let redisDisconnectCallback: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = {
    ctx, _ in
    guard let ctx, let conn = connection(ctx) else { return }
    let why = ctx.pointee.errstr.map { String(cString: $0) } ?? "disconnected"
    conn.contextGone(UnsafeMutablePointer(mutating: ctx), reason: why.isEmpty ? "disconnected" : why)
}
