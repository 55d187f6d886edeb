import EventLoop
import Logging
import Synchronization

/// One loop's way to Redis, whatever the topology (one Redis, Sentinel, Cluster): a command names the
/// key (or slot) it touches and goes to the master serving that slot, on this loop's one connection to
/// that master. The session layer never learns the topology.
///
/// - Routing: the slot of the given key (`RedisSlot`, hash tags honoured); on one Redis and on Sentinel
///   every slot is the one master's. The map comes from the topology's `RedisMasterLocator`.
/// - Redirections: `MOVED` patches the map, refreshes it, and sends the command where it lives now;
///   `ASK` sends `ASKING` and the command to the importing node, once (at most `maxRedirects` in all).
///   `TRYAGAIN` (a multi-key command during a migration) is retried after 50 ms within the command's
///   time-out. These are safe to retry: Redis did not run the command.
/// - Failover: a command whose master is down, being replaced (`CLUSTERDOWN`, `MASTERDOWN`,
///   `LOADING`) or demoted (`READONLY`) fails at once with `.unavailable` (it did not run) and the
///   locator looks for the new master (every `failoverPollInterval`); it is never queued behind the
///   failover. Time-outs and lost connections are never retried: the command may have run.
/// - A connection made for a master that was never ready yet (at start, after a failover, a `MOVED` to a
///   new node) holds its commands until it is ready or their time-out passes.
/// - Old masters' connections are retired: no new command, closed once their replies had time to come.
///
/// Threading: loop-bound. `start`, `close`, `send*`, `evalScript*` and every callback on `loop`'s
/// thread (its mutable state is a `LoopBound`, which traps elsewhere); `isReady`, `isSharded`, `metrics`,
/// `onEvent` and `onRoundTrip` from any thread; the `async` variants hop to the loop from anywhere.
public final class RedisClient: Sendable {
    /// The completion of one command; runs on the loop.
    public typealias Callback = (Result<RESPValue, RedisError>) -> Void

    /// The loop this client lives on.
    public let loop: EventLoop
    /// Where and how it connects.
    public let topology: RedisTopology
    /// How it follows the topology.
    public let options: RedisClientOptions
    /// Counters shared with the other loops' clients.
    public let metrics: RedisClientMetrics
    /// Called on the loop with every event (after counting it in `metrics`); set before `start()`.
    public var onEvent: (@Sendable (RedisClientEvent) -> Void)? {
        get { hooks.withLock { $0.onEvent } }
        set { hooks.withLock { $0.onEvent = newValue } }
    }
    /// Called on the loop with each reply's round trip in seconds; set before `start()` (connections
    /// made later take the value they find).
    public var onRoundTrip: (@Sendable (Double) -> Void)? {
        get { hooks.withLock { $0.onRoundTrip } }
        set { hooks.withLock { $0.onRoundTrip = newValue } }
    }

    let logger: Logger
    let readyFlag = Atomic<Bool>(false)
    private let hooks = Lock<Hooks>(Hooks())
    /// Scripts loaded on every master as soon as this loop's connection to it is ready (`preload`).
    let preloaded = Lock<[RedisScript]>([])
    /// Everything that changes, the loop's only.
    private let state: LoopBound<State>

    struct Hooks {
        var onEvent: (@Sendable (RedisClientEvent) -> Void)?
        var onRoundTrip: (@Sendable (Double) -> Void)?
    }

    /// The client's mutable state (its loop only).
    struct State {
        let locator: any RedisMasterLocator
        /// The command connections (`RedisLane.commands`): readiness and admission look at these.
        var pool: [RedisAddress: RedisConnection] = [:]
        /// The connections of the other lanes (`.replicated`, `.leases`), made on first use.
        var lanePools: [RedisLane: [RedisAddress: RedisConnection]] = [:]
        /// Connections that were never ready yet: commands for them wait (see `Waiter`).
        var fresh: Set<ObjectIdentifier> = []
        var waiters: [ObjectIdentifier: [Waiter]] = [:]
        var topologyObservers: [() -> Void] = []
        var watchTimer: LoopTimer?
        var roleTimer: LoopTimer?
        var closed = false
        /// Connected replicas per master (`ROLE`: when its connection is ready, every
        /// `topologyRefreshInterval`, every second while it has fewer than a command wanted, and at once
        /// after a `WAIT` that found fewer).
        var replicaCounts: [RedisAddress: Int] = [:]
        /// Masters that had fewer replicas than a replicated command wanted, and when `ROLE` was last sent to
        /// each: read again every second until they have enough.
        var shortMasters: [RedisAddress: (readAt: UInt64, wanted: Int)] = [:]
        /// Replicated commands written in this loop iteration, per connection, waiting for their `WAIT`.
        var openBatches: [ObjectIdentifier: WaitBatch] = [:]
    }

    var locator: any RedisMasterLocator { state.value.locator }
    var pool: [RedisAddress: RedisConnection] {
        get { state.value.pool }
        _modify { yield &state.value.pool }
    }
    var lanePools: [RedisLane: [RedisAddress: RedisConnection]] {
        get { state.value.lanePools }
        _modify { yield &state.value.lanePools }
    }
    var fresh: Set<ObjectIdentifier> {
        get { state.value.fresh }
        _modify { yield &state.value.fresh }
    }
    var waiters: [ObjectIdentifier: [Waiter]] {
        get { state.value.waiters }
        _modify { yield &state.value.waiters }
    }
    var topologyObservers: [() -> Void] {
        get { state.value.topologyObservers }
        _modify { yield &state.value.topologyObservers }
    }
    var closed: Bool {
        get { state.value.closed }
        set { state.value.closed = newValue }
    }
    var replicaCounts: [RedisAddress: Int] {
        get { state.value.replicaCounts }
        _modify { yield &state.value.replicaCounts }
    }
    var openBatches: [ObjectIdentifier: WaitBatch] {
        get { state.value.openBatches }
        _modify { yield &state.value.openBatches }
    }
    var shortMasters: [RedisAddress: (readAt: UInt64, wanted: Int)] {
        get { state.value.shortMasters }
        _modify { yield &state.value.shortMasters }
    }

    struct Waiter {
        var request: Request
        var timer: LoopTimer
    }

    /// A client on `loop` for `topology`; call `start()` (on the loop, or `startFromAnyThread()`).
    public init(
        loop: EventLoop, topology: RedisTopology, options: RedisClientOptions = RedisClientOptions(),
        metrics: RedisClientMetrics = RedisClientMetrics(), logger: Logger = Logger(label: "redis")
    ) {
        self.loop = loop
        self.topology = topology
        self.options = options
        self.metrics = metrics
        self.logger = logger
        let locator: any RedisMasterLocator
        switch topology.kind {
        case .standalone: locator = RedisStandaloneLocator(address: topology.seeds[0])
        case .sentinel(let name): locator = RedisSentinelLocator(name: name)
        case .cluster: locator = RedisClusterLocator()
        }
        state = LoopBound(State(locator: locator), loop: loop)
    }

    /// True on a Redis Cluster: keys of different slots may live on different masters, so a multi-key
    /// command or script must keep its keys in one slot (hash tags) and batches are split by slot.
    public var isSharded: Bool { topology.kind == .cluster }

    /// The slot of `key` (the same on every topology; it matters on a cluster).
    public static func slot(of key: RedisArg) -> Int { RedisSlot.of(key.bytes) }

    /// True when the topology is known and every master's connection is ready (`/readyz`). Any thread.
    public var isReady: Bool { readyFlag.load(ordering: .relaxed) }

    /// Starts learning the topology and connecting. Loop thread only.
    public func start() {
        precondition(loop.inEventLoop, "RedisClient.start off its loop")
        let context = RedisLocatorContext(
            loop: loop, topology: topology, options: options, logger: logger,
            changed: { [weak self] in self?.topologyChanged() }, report: { [weak self] in self?.report($0) })
        locator.start(context)
        state.value.watchTimer = loop.scheduleRepeating(every: options.failoverPollInterval) { [weak self] in
            self?.watch()
        }
        state.value.roleTimer = loop.scheduleRepeating(every: options.topologyRefreshInterval) { [weak self] in
            self?.countReplicas()
        }
    }

    /// Closes every connection for good; waiting commands fail. Loop thread only.
    public func close() {
        precondition(loop.inEventLoop, "RedisClient.close off its loop")
        closed = true
        state.value.watchTimer?.cancel()
        state.value.roleTimer?.cancel()
        locator.close()
        for c in Array(pool.values) + lanePools.values.flatMap(\.values) {
            c.onStateChange = nil
            c.onSilence = nil
            failWaiters(of: c, .connectionLost("closed"))
            c.close()
        }
        pool = [:]
        lanePools = [:]
        readyFlag.store(false, ordering: .relaxed)
    }

    /// Sends `args`, routed by the slot of `key` (nil: any master, for keyless commands). `timeout`
    /// (default: the command time-out) bounds the whole command, redirections included. Loop thread only.
    public func send(
        _ args: [RedisArg], key: RedisArg?, timeout: Double? = nil, lane: RedisLane = .commands,
        _ callback: @escaping Callback
    ) {
        send(args, slot: key.map(Self.slot(of:)), timeout: timeout, lane: lane, callback)
    }

    /// Sends `args` to the master of `slot` (nil: any master), on `lane`'s connection. Loop thread only.
    public func send(
        _ args: [RedisArg], slot: Int?, timeout: Double? = nil, lane: RedisLane = .commands,
        _ callback: @escaping Callback
    ) {
        precondition(loop.inEventLoop, "RedisClient.send off its loop")
        route(Request(args: args, slot: slot, deadline: deadline(timeout), lane: lane) { r, _ in callback(r) })
    }

    /// Loads `scripts` on every master as soon as this loop's command connection to it is ready (now, and
    /// after every reconnect, failover or new master), so that their first use there — a commit that is
    /// followed by `WAIT` — does not cost a `NOSCRIPT` round trip. Any thread.
    public func preload(_ scripts: [RedisScript]) {
        preloaded.withLock { $0 += scripts }
        loop.execute { [weak self] in
            guard let self, !self.closed else { return }
            for c in self.pool.values where c.state == .ready { self.load(self.preloaded.withLock { $0 }, on: c) }
        }
    }

    /// Sends `SCRIPT LOAD` of each of `scripts` on `connection` (replies ignored: a failure only means a
    /// `NOSCRIPT` later). Loop thread only.
    func load(_ scripts: [RedisScript], on connection: RedisConnection) {
        for s in scripts { connection.send(["SCRIPT", "LOAD", RedisArg(s.source)]) { _ in } }
    }

    /// Adds an observer called on the loop whenever the masters or the slot map may have changed (the
    /// subscriber moves its channels). Loop thread only.
    public func addTopologyObserver(_ observer: @escaping () -> Void) { topologyObservers.append(observer) }

    /// The master serving `slot` now (nil: unknown). Loop thread only.
    public func master(forSlot slot: Int) -> RedisAddress? { locator.master(forSlot: slot) }

    /// Every master known now. Loop thread only.
    public var masters: [RedisAddress] { locator.masters }

    /// Asks the locator to read the topology again soon (a subscriber saw a `MOVED` or a server's
    /// `sunsubscribe`). Loop thread only.
    public func topologyMayHaveChanged(_ reason: String) { locator.suspect(reason) }

    // MARK: Routing

    /// One command on its way: where it is going, how far, and what to do with its reply.
    struct Request {
        var args: [RedisArg]
        var slot: Int?
        var deadline: UInt64
        var redirects = 0
        var asking: RedisAddress?
        var script: RedisScript?
        var scriptLoaded = false
        var wait: (replicas: Int, timeout: Double)?
        /// The connection it takes (a replicated command takes `.replicated` whatever this says).
        var lane: RedisLane
        /// Its completion: the reply, and for a replicated command what its `WAIT` found.
        var done: (Result<RESPValue, RedisError>, ReplicaAcks?) -> Void

        init(
            args: [RedisArg], slot: Int?, deadline: UInt64, script: RedisScript? = nil,
            wait: (replicas: Int, timeout: Double)? = nil, lane: RedisLane = .commands,
            done: @escaping (Result<RESPValue, RedisError>, ReplicaAcks?) -> Void
        ) {
            self.args = args
            self.slot = slot
            self.deadline = deadline
            self.script = script
            self.wait = wait
            self.lane = lane
            self.done = done
        }
    }

    func deadline(_ timeout: Double?) -> UInt64 {
        monotonicNanos() &+ UInt64(max(0, timeout ?? topology.node.commandTimeout) * 1e9)
    }

    func route(_ request: Request) {
        let now = monotonicNanos()
        guard now < request.deadline else { return request.done(.failure(.timeout), nil) }
        guard !closed else { return request.done(.failure(.notConnected), nil) }
        let target: RedisAddress?
        if let asking = request.asking {
            target = asking
        } else if let slot = request.slot {
            target = locator.master(forSlot: slot)
        } else {
            target = locator.masters.first
        }
        guard let address = target else {
            locator.suspect("no master known")
            return unavailable(request, nil, "no master known" + (request.slot.map { " for slot \($0)" } ?? ""))
        }
        if let wanted = request.wait?.replicas, options.replicaAcksStrict, let have = replicaCounts[address],
            have < wanted
        {
            noteShort(address, wanted: wanted)
            return request.done(.failure(.shortOfReplicas(connected: have, wanted: wanted)), nil)
        }
        let connection = self.connection(to: address, lane: request.wait != nil ? .replicated : request.lane)
        switch connection.state {
        case .ready where connection.isSilent:  // held until answered or its deadline, as many as it would hold
            guard (waiters[ObjectIdentifier(connection)]?.count ?? 0) < connection.configuration.maxQueued else {
                return request.done(.failure(.overloaded), nil)
            }
            hold(request, for: connection)
        case .ready: write(request, on: connection, at: address)
        case .connecting where fresh.contains(ObjectIdentifier(connection)): hold(request, for: connection)
        default:
            locator.suspect("master \(address) down")
            unavailable(request, address, "master \(address) is not connected (\(connection.state))")
        }
    }

    func unavailable(_ request: Request, _ address: RedisAddress?, _ why: String) {
        report(.unavailable(address, reason: why))
        request.done(.failure(.unavailable(why)), nil)
    }

    func write(_ request: Request, on connection: RedisConnection, at address: RedisAddress) {
        let remaining = Double(request.deadline &- min(request.deadline, monotonicNanos())) / 1e9
        if request.asking != nil { connection.send(["ASKING"], timeout: remaining) { _ in } }
        if request.wait != nil { return writeReplicated(request, on: connection, at: address, remaining: remaining) }
        connection.send(request.args, timeout: remaining) { [weak self] result in
            guard let self else { return request.done(result, nil) }
            self.replied(request, result, from: address, on: connection) { request.done(.success($0), nil) }
        }
    }

    /// A reply: delivered (`success`, or the failure), or the command goes on (redirect, `NOSCRIPT`,
    /// `TRYAGAIN`), or it fails as unavailable.
    func replied(
        _ request: Request, _ result: Result<RESPValue, RedisError>, from address: RedisAddress,
        on connection: RedisConnection, success: (RESPValue) -> Void
    ) {
        let error: RedisError
        switch result {
        case .success(let value): return success(value)
        case .failure(let e): error = e
        }
        guard case .server(let message) = error else {
            if error == .notConnected {
                locator.suspect("connection lost")
                return unavailable(request, address, "master \(address) is not connected")
            }
            return request.done(.failure(error), nil)
        }
        if let redirect = RedisRedirect(message, from: address), request.redirects < options.maxRedirects {
            var next = request
            next.redirects += 1
            switch redirect {
            case .moved(let slot, let to):
                report(.moved(slot: slot, to: to))
                locator.moved(slot: slot, to: to)
                next.asking = nil
            case .ask(let slot, let to):
                report(.ask(slot: slot, to: to))
                next.asking = to
            }
            return route(next)
        }
        switch error.serverCode {
        case "NOSCRIPT" where request.script != nil && !request.scriptLoaded:
            // Not run: load it on this master (pipelined) and run it again, once.
            // A replicated command's retry is written after the `WAIT` that followed its first try, which
            // may block its connection for the replica time-out: its deadline allows for that.
            var next = request
            next.scriptLoaded = true
            if let wait = request.wait { next.deadline &+= UInt64(wait.timeout * 1e9) }
            connection.send(["SCRIPT", "LOAD", RedisArg(request.script!.source)]) { _ in }
            write(next, on: connection, at: address)
        case "TRYAGAIN":
            loop.schedule(after: 0.05) { [weak self] in self?.route(request) }
        case "READONLY", "CLUSTERDOWN", "MASTERDOWN", "LOADING":
            locator.suspect(message)
            unavailable(request, address, message)
        default:
            request.done(.failure(error), nil)
        }
    }

    func report(_ event: RedisClientEvent) {
        metrics.record(event)
        onEvent?(event)
    }
}
