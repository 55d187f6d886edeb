import CHiredis
import EventLoop
import Logging
import Synchronization

/// One subscribe-mode connection to one Redis: `SSUBSCRIBE`/`SUBSCRIBE`/`PSUBSCRIBE` and their
/// unsubscribes, one channel per command, with the messages they bring. The building block of
/// `RedisShardedSubscriber` (one per loop per master) and of the sentinel watch.
///
/// Why not `RedisConnection`: hiredis 0.14's async layer knows only the classic pub/sub replies. A
/// `smessage` (Redis 7's sharded pub/sub, RESP2) that arrives with no command waiting would trip its
/// assertion, or be taken as the reply of the next command. So this connection reads in raw mode
/// (`chiredis_attach_raw`): every reply comes here in order and is matched against a FIFO of the
/// confirmations it expects; messages and a server's own `sunsubscribe` (a slot that moved away) are
/// told apart by their kind. When a command's confirmation does not come within the command time-out
/// and nothing else came meanwhile either, the connection is dropped and made again only if its TCP path
/// is gone (`RedisPath`) or the silence lasts `RedisPath.keptSilenceLimits` limits: a Redis that is
/// slow or stopped, whose host still acknowledges, keeps the connection, as it keeps a `RedisConnection`.
///
/// Threading: loop-bound. Everything but `state` on `loop`'s thread; callbacks run there.
// Unchecked: hiredis's callback context in raw mode (`Unmanaged` in its C read and connect callbacks);
// its fields are loop-thread-only.
final class RedisPubSubConnection: @unchecked Sendable {
    /// The subscribe-family commands.
    enum Command: String {
        case ssubscribe, sunsubscribe, subscribe, unsubscribe, psubscribe, punsubscribe
    }

    let loop: EventLoop
    /// The node, with its password and time-outs (`database` is ignored: pub/sub spans databases).
    let configuration: RedisConfiguration
    /// Called on the loop after every state change.
    var onStateChange: ((RedisConnectionState) -> Void)?
    /// Every message: `sharded` for `smessage`.
    var onMessage: ((RedisMessage, _ sharded: Bool) -> Void)?
    /// A `sunsubscribe` this connection did not ask for: the server dropped the subscription (its slot
    /// moved to another master).
    var onServerUnsubscribe: ((String) -> Void)?

    private let logger: Logger
    private let backoff: Backoff
    private let stateValue = Atomic<UInt8>(RedisConnectionState.disconnected.rawValue)
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var expected: [Expect] = []
    private var expectedHead = 0
    private var nextID: UInt = 1
    private var attempt = 0
    private var reconnectTimer: LoopTimer?
    private var isClosed = false
    private var flushQueued = false
    /// When the last reply or message came (`monotonicNanos`): a confirmation late while others keep
    /// coming is a slow Redis, not a dead one.
    private var lastReplyAt: UInt64 = 0

    /// Seconds since anything last came on this connection (a reply or a message); loop thread only.
    var secondsSinceLastReply: Double { Double(monotonicNanos() &- lastReplyAt) / 1e9 }

    /// True when Redis has sent something this loop has not read yet (a stalled loop, not a deaf
    /// connection); loop thread only.
    var hasUnreadReplies: Bool { UnreadReplies.waiting(on: context) }

    private struct Expect {
        var id: UInt
        /// The confirmation's kind and channel; nil for a plain reply (`AUTH`, `PING` before subscribing).
        var kind: String?
        var channel: String?
        var callback: (Result<RESPValue, RedisError>) -> Void
        var timer: LoopTimer?
    }

    /// A connection to `configuration` on `loop`; `start()` on the loop.
    init(loop: EventLoop, configuration: RedisConfiguration, logger: Logger) {
        self.loop = loop
        self.configuration = configuration
        self.logger = logger
        backoff = Backoff(base: configuration.reconnectBase, max: configuration.reconnectMax)
    }

    /// The current state; any thread.
    var state: RedisConnectionState {
        RedisConnectionState(rawValue: stateValue.load(ordering: .acquiring)) ?? .closed
    }

    /// Where it connects.
    var address: RedisAddress { RedisAddress(host: configuration.host, port: configuration.port) }

    /// Starts connecting (and reconnecting). Loop thread only.
    func start() {
        precondition(loop.inEventLoop, "RedisPubSubConnection.start off its loop")
        guard !isClosed, context == nil, reconnectTimer == nil else { return }
        connect()
    }

    /// Closes for good; waiting commands fail with `.connectionLost`. Loop thread only.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        reconnectTimer?.cancel()
        reconnectTimer = nil
        drop(reason: "closed", reconnect: false)
        setState(.closed)
    }

    /// Drops the connection and makes it again (every subscription on it ends). Loop thread only.
    func reconnect(reason: String) {
        guard !isClosed else { return }
        drop(reason: reason, reconnect: true)
    }

    /// Sends `command channel`; `done` gets Redis's confirmation, or its error (`MOVED` for a sharded
    /// channel whose slot is elsewhere), or `.notConnected`/`.connectionLost`. Loop thread only.
    func send(_ command: Command, _ channel: String, _ done: @escaping (Result<RESPValue, RedisError>) -> Void) {
        guard state == .ready else { return done(.failure(.notConnected)) }
        expect(
            [RedisArg(command.rawValue.uppercased()), RedisArg(channel)], kind: command.rawValue, channel: channel,
            done)
    }

    // MARK: Connecting

    private func connect() {
        reconnectTimer = nil
        setState(.connecting)
        guard let ctx = redisAsyncConnect(configuration.host, Int32(configuration.port)) else {
            return scheduleReconnect(reason: "redisAsyncConnect returned NULL")
        }
        if ctx.pointee.err != 0 {
            let why = ctx.pointee.errstr.map { String(cString: $0) } ?? "error \(ctx.pointee.err)"
            redisAsyncFree(ctx)
            return scheduleReconnect(reason: why)
        }
        ctx.pointee.data = Unmanaged.passRetained(self).toOpaque()
        context = ctx
        guard chiredis_attach_raw(ctx, loop.base, pubSubReplyCallback) == REDIS_OK else {
            return drop(reason: "attaching to the event loop failed", reconnect: true)
        }
        redisAsyncSetConnectCallback(ctx, pubSubConnectCallback)
        redisAsyncSetDisconnectCallback(ctx, pubSubDisconnectCallback)
        if let password = configuration.password {
            expect(["AUTH", RedisArg(password)], kind: nil, channel: nil, timeout: configuration.connectTimeout) {
                [weak self] r in
                if case .failure(.server(let e)) = r { self?.drop(reason: "AUTH failed: \(e)", reconnect: true) }
            }
        }
        expect(["PING"], kind: nil, channel: nil, timeout: configuration.connectTimeout) { [weak self] r in
            guard let self, self.context == ctx else { return }
            if case .failure(let e) = r {
                if case .server = e { self.drop(reason: "PING failed: \(e)", reconnect: true) }
                return
            }
            self.attempt = 0
            self.setState(.ready)
        }
    }

    private func scheduleReconnect(reason: String) {
        setState(isClosed ? .closed : .disconnected)
        guard !isClosed, reconnectTimer == nil else { return }
        let delay = backoff.delay(attempt: attempt)
        attempt += 1
        logger.warning(
            "redis subscription connection down; reconnecting",
            metadata: ["redis": "\(address)", "reason": "\(reason)", "in": "\(delay)"])
        reconnectTimer = loop.schedule(after: delay) { [weak self] in self?.connect() }
    }

    /// Frees the context ourselves (time-out, failed hand-shake, close, a failed read).
    private func drop(reason: String, reconnect: Bool) {
        guard let ctx = context else { return }
        gone(ctx, reason: reason, reconnect: reconnect)
        redisAsyncFree(ctx)
    }

    /// Detaches from a context that is going away, fails what waits, reconnects unless closed.
    fileprivate func gone(_ ctx: UnsafeMutablePointer<redisAsyncContext>, reason: String, reconnect: Bool = true) {
        guard let data = ctx.pointee.data else { return }
        ctx.pointee.data = nil
        if context == ctx { context = nil }
        let failed = expected[expectedHead...]
        expected = []
        expectedHead = 0
        for e in failed {
            e.timer?.cancel()
            e.callback(.failure(.connectionLost(reason)))
        }
        if reconnect { scheduleReconnect(reason: reason) } else { setState(isClosed ? .closed : .disconnected) }
        Unmanaged<RedisPubSubConnection>.fromOpaque(data).release()
    }

    private func setState(_ s: RedisConnectionState) {
        let old = stateValue.exchange(s.rawValue, ordering: .acquiringAndReleasing)
        if old != s.rawValue { onStateChange?(s) }
    }

    // MARK: Commands and replies

    private func expect(
        _ args: [RedisArg], kind: String?, channel: String?, timeout: Double? = nil,
        _ callback: @escaping (Result<RESPValue, RedisError>) -> Void
    ) {
        guard let ctx = context else { return callback(.failure(.notConnected)) }
        let command = respCommand(args)
        let status = command.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { chiredis_append_raw(ctx, $0.baseAddress, $0.count - 1) }
        }
        guard status == REDIS_OK else {
            return callback(.failure(.connectionLost("redisAppendFormattedCommand failed")))
        }
        let id = nextID
        nextID &+= 1
        let limit = timeout ?? configuration.commandTimeout
        if expectedHead == expected.count { lastReplyAt = monotonicNanos() }  // nothing waited: the clock starts
        let due = monotonicNanos() &+ UInt64(limit * 1e9)
        let timer = loop.schedule(after: limit) { [weak self] in
            self?.overdue(id, kind: kind, limit: limit, due: due, graced: false)
        }
        expected.append(Expect(id: id, kind: kind, channel: channel, callback: callback, timer: timer))
        scheduleFlush()
    }

    /// The confirmation `id` did not come within `limit`. The connection is dropped (and made again) only
    /// when nothing at all came for `limit` while it waited: a confirmation behind thousands of others
    /// (a resubscribe after a failover) on a busy Redis is slow, not lost, and dropping the connection
    /// would send them all again (a cascade of resubscribes). Otherwise checked again once `limit` has passed
    /// without a reply.
    /// The check was due at `due` (monotonic ns): one run long after that, or after the loop was starved
    /// within the silence, follows a pause, and waits a grace before dropping (`UnreadReplies.pauseGrace`),
    /// once (`graced`).
    private func overdue(_ id: UInt, kind: String?, limit: Double, due: UInt64, graced: Bool) {
        guard let head = expected[expectedHead...].first, head.id <= id else { return }
        let now = monotonicNanos()
        let quiet = secondsSinceLastReply
        let again: Double
        var graced = graced
        if hasUnreadReplies {
            // Redis has sent something the loop has not read yet: not a dead connection. Look again soon.
            again = UnreadReplies.recheckDelay(limit)
        } else if quiet < limit * 0.999 {
            again = limit - quiet
        } else if !graced,
            let grace = UnreadReplies.pauseGrace(
                late: UnreadReplies.secondsLate(due, now: now), since: UnreadReplies.start(ofQuiet: quiet, now: now),
                loop: loop, limit: limit)
        {
            again = grace
            graced = true
        } else {
            let path = RedisPath.read(context)
            // Redis's host acknowledges: slow or stopped. A new connection would subscribe every channel
            // again into the same Redis; the confirmation comes when Redis gets to it.
            guard RedisPath.keeps(path, silentFor: quiet, limit: limit) else {
                let tcp = path?.description ?? "unknown"
                return drop(
                    reason: "no reply to \(kind ?? "a command") within \(limit) s (TCP: \(tcp))", reconnect: true)
            }
            again = limit
        }
        let next = now &+ UInt64(again * 1e9)
        _ = loop.schedule(after: again) { [weak self] in
            self?.overdue(id, kind: kind, limit: limit, due: next, graced: graced)
        }
    }

    private func scheduleFlush() {
        guard !flushQueued else { return }
        flushQueued = true
        loop.runSoon { [self] in
            flushQueued = false
            guard let ctx = context, ctx.pointee.c.flags & REDIS_CONNECTED != 0 else { return }
            redisAsyncHandleWrite(ctx)
        }
    }

    private func popExpected() -> Expect? {
        guard expectedHead < expected.count else { return nil }
        let e = expected[expectedHead]
        expectedHead += 1
        if expectedHead > 64, expectedHead * 2 > expected.count {
            expected.removeFirst(expectedHead)
            expectedHead = 0
        }
        e.timer?.cancel()
        return e
    }

    fileprivate func received(_ value: RESPValue) {
        lastReplyAt = monotonicNanos()
        if case .array(let items) = value, let kind = items.first?.string?.lowercased() {
            switch (kind, items.count) {
            case ("message", 3), ("smessage", 3):
                guard let channel = items[1].string, let payload = items[2].bytes else { return }
                onMessage?(RedisMessage(channel: channel, payload: payload), kind == "smessage")
                return
            case ("pmessage", 4):
                guard let pattern = items[1].string, let channel = items[2].string, let payload = items[3].bytes
                else { return }
                onMessage?(RedisMessage(channel: channel, pattern: pattern, payload: payload), false)
                return
            case ("subscribe", 3), ("ssubscribe", 3), ("psubscribe", 3), ("unsubscribe", 3), ("sunsubscribe", 3),
                ("punsubscribe", 3):
                let channel = items[1].string
                if let head = expected[expectedHead...].first, head.kind == kind, head.channel == channel {
                    popExpected()?.callback(.success(value))
                } else if kind == "sunsubscribe", let channel {
                    onServerUnsubscribe?(channel)
                } else {
                    logger.debug("unexpected pub/sub reply", metadata: ["kind": "\(kind)", "redis": "\(address)"])
                }
                return
            default: break
            }
        }
        guard let head = popExpected() else {
            return logger.debug("reply nobody waited for", metadata: ["redis": "\(address)", "reply": "\(value)"])
        }
        if case .error(let message) = value { return head.callback(.failure(.server(message))) }
        head.callback(.success(value))
    }
}

private func pubSub(_ ctx: UnsafePointer<redisAsyncContext>?) -> RedisPubSubConnection? {
    guard let data = ctx?.pointee.data else { return nil }
    return Unmanaged<RedisPubSubConnection>.fromOpaque(data).takeUnretainedValue()
}

private let pubSubReplyCallback:
    @convention(c) (UnsafeMutablePointer<redisAsyncContext>?, UnsafeMutableRawPointer?)
        -> Void = { ctx, reply in
            guard let ctx else { return }
            guard let reply else {
                // Reading failed: we free the context (the shim's contract).
                let why =
                    ctx.pointee.c.errstr.0 == 0
                    ? "read failed"
                    : withUnsafeBytes(of: ctx.pointee.c.errstr) {
                        String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                    }
                if let conn = pubSub(ctx) { conn.gone(ctx, reason: why) }
                redisAsyncFree(ctx)
                return
            }
            guard let conn = pubSub(ctx) else { return }
            conn.received(RESPValue(reply: reply.assumingMemoryBound(to: redisReply.self)))
        }

private let pubSubConnectCallback: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = { ctx, status in
    guard status != REDIS_OK, let ctx, let conn = pubSub(ctx) else { return }
    let why = ctx.pointee.errstr.map { String(cString: $0) } ?? "connect failed"
    conn.gone(UnsafeMutablePointer(mutating: ctx), reason: why)
}

private let pubSubDisconnectCallback: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = { ctx, _ in
    guard let ctx, let conn = pubSub(ctx) else { return }
    let why = ctx.pointee.errstr.map { String(cString: $0) } ?? "disconnected"
    conn.gone(UnsafeMutablePointer(mutating: ctx), reason: why.isEmpty ? "disconnected" : why)
}
