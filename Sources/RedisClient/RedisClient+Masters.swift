import EventLoop

extension RedisClient {
    /// Sends `args` to every master known now, each on this loop's command connection to it (so it is
    /// answered after whatever was written there before: a `PING` that says earlier commands have left);
    /// `done` gets the replies once every one came (a master not connected fails at once). Loop thread only.
    public func sendToEachMaster(
        _ args: [RedisArg], timeout: Double? = nil, _ done: @escaping ([Result<RESPValue, RedisError>]) -> Void
    ) {
        precondition(loop.inEventLoop, "RedisClient.sendToEachMaster off its loop")
        let targets = masters
        guard !targets.isEmpty else { return done([]) }
        var results: [Result<RESPValue, RedisError>] = []
        for m in targets {
            guard let c = connectionIfAny(to: m), c.state == .ready else {
                results.append(.failure(.unavailable("master \(m) is not connected")))
                if results.count == targets.count { done(results) }
                continue
            }
            c.send(args, timeout: timeout) { r in
                results.append(r)
                if results.count == targets.count { done(results) }
            }
        }
    }

    /// `items` in groups whose keys (`key(item)`) one master serves, in their order: one group on one Redis
    /// or a Sentinel's master, one per master on a Redis Cluster (by this loop's slot map, which may be out
    /// of date: a call over a group then fails with `isSlotRedirect`). For multi-key scripts flagged
    /// `allow-cross-slot-keys`. Loop thread only.
    public func groupedByMaster<T>(_ items: [T], key: (T) -> RedisArg) -> [[T]] {
        guard isSharded, items.count > 1 else { return items.isEmpty ? [] : [items] }
        return Self.grouped(items) { masterName(serving: key($0)) }
    }

    /// `items` in groups of one slot each (`key(item)`'s), in the order their slots first appear, each
    /// group in the items' order: a batch Redis refused as crossing slots, sent again one slot at a time.
    public static func groupedBySlot<T>(_ items: [T], key: (T) -> RedisArg) -> [[T]] {
        grouped(items) { slot(of: key($0)) }
    }

    /// `items` grouped by `group(item)`, the groups in the order they first appear, each in the items' order.
    private static func grouped<T, G: Hashable>(_ items: [T], by group: (T) -> G) -> [[T]] {
        var order: [G] = []
        var groups: [G: [T]] = [:]
        for item in items {
            let g = group(item)
            if groups[g] == nil { order.append(g) }
            groups[g, default: []].append(item)
        }
        return order.map { groups[$0]! }
    }

    /// A name for the master that serves `key`'s slot by this loop's slot map ("slot N" while none is
    /// known): equal for keys one master serves, on any topology (one name on one Redis or a Sentinel's
    /// master). For grouping work per master. `key` is made only on a sharded topology. Loop thread only.
    public func masterName(serving key: @autoclosure () -> RedisArg) -> String {
        guard isSharded else { return "master" }
        let slot = Self.slot(of: key())
        return master(forSlot: slot).map { "\($0)" } ?? "slot \(slot)"
    }

    /// Commands this loop's connection to the master of `key`'s slot has outstanding (0 without one). Loop
    /// thread only. `key` is only built (and its slot computed) when the topology is sharded.
    public func commandsInFlight(key: @autoclosure () -> RedisArg) -> Int {
        guard let m = master(forSlot: slot(ifSharded: key)) else { return 0 }
        return connectionIfAny(to: m)?.waiting ?? 0
    }

    /// True when the master serving `key`'s slot is known and this loop's connection to it is ready and not
    /// silent: a command for `key` would be sent now (not failed at once as unavailable, nor held). Loop thread only.
    public func canServe(key: @autoclosure () -> RedisArg) -> Bool {
        guard let m = master(forSlot: slot(ifSharded: key)) else { return false }
        return connectionIfAny(to: m)?.isAnswering == true
    }

    /// `canServe(key:)`, and a command for `key` that must reach `replicas` replicas would not be refused
    /// for want of them (`RedisClientOptions.replicaAcksStrict`). Loop thread only.
    public func canServe(key: @autoclosure () -> RedisArg, replicas: Int) -> Bool {
        guard let m = master(forSlot: slot(ifSharded: key)), connectionIfAny(to: m)?.isAnswering == true else {
            return false
        }
        return !options.replicaAcksStrict || (replicaCounts[m] ?? replicas) >= replicas
    }

    /// `key`'s slot where slots pick the master; 0 (any slot: one master serves them all) otherwise,
    /// without building the key (a commit asks for every call: a CRC16 of a key made for nothing).
    private func slot(ifSharded key: () -> RedisArg) -> Int { isSharded ? Self.slot(of: key()) : 0 }
}
