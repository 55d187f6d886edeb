import EventLoop
import Logging

/// Redis Cluster: the slot map, read with `CLUSTER SHARDS` (`CLUSTER SLOTS` where that is unknown)
/// from any reachable node (the seeds, then every node the map lists), again every
/// `topologyRefreshInterval`, and soon after anything suspicious (a `MOVED`, which also patches the
/// slot at once; a master that is down; `CLUSTERDOWN`). A master whose slots went to one of its own
/// replicas is reported as a failover.
///
/// A node that is behind the cluster is not believed: each read first asks `CLUSTER INFO`, and a node
/// whose `cluster_current_epoch` is below the highest this locator has seen is skipped (the next node is
/// asked). That is a master killed and restarted after its replica took over: until the cluster's
/// gossip reaches it (milliseconds) it loads its old `nodes.conf` and calls itself the master of its
/// slots — without persistence, with an empty data set. Believing it would send commands there (a
/// session `GONE`, a stream ended as deleted); its epoch is older than the failover's, so it is not.
///
/// Threading: loop-bound like its client.
final class RedisClusterLocator: RedisMasterLocator {
    private var context: RedisLocatorContext!
    private var map: RedisSlotMap?
    private var node: RedisRotatingConnection!
    private var schedule: RedisRefreshSchedule!
    private var useSlots = false
    private var lastError: String?
    /// The highest `cluster_current_epoch` a node reported: a node below it has not heard of every
    /// failover yet, and its map is not used.
    private var knownEpoch = 0

    var isSharded: Bool { true }

    func master(forSlot slot: Int) -> RedisAddress? { map?.master(ofSlot: slot) }

    var masters: [RedisAddress] { map?.masters ?? [] }

    func start(_ context: RedisLocatorContext) {
        self.context = context
        node = RedisRotatingConnection(
            loop: context.loop, candidates: { [weak self] in self?.candidates ?? [] },
            configuration: { context.topology.configuration(for: $0) }, pause: context.options.failoverPollInterval,
            logger: context.logger)
        schedule = RedisRefreshSchedule(
            loop: context.loop, every: context.options.topologyRefreshInterval,
            minimum: context.options.failoverPollInterval
        ) { [weak self] done in
            guard let self else { return done() }
            self.refresh(done)
        }
        node.onReady = { [weak self] in self?.schedule.soon() }
        node.start()
        schedule.start()
    }

    func suspect(_ reason: String) { schedule?.soon() }

    func moved(slot: Int, to address: RedisAddress) {
        if map == nil { map = RedisSlotMap(shards: []) }
        if map?.master(ofSlot: slot) != address {
            map?.assign(slot: slot, to: address)
            context.changed()
        }
        schedule.soon()
    }

    var problems: [String] {
        guard let map else { return ["no slot map yet" + (lastError.map { " (\($0))" } ?? "")] }
        let uncovered = map.uncoveredSlots
        return uncovered == 0 ? [] : ["\(uncovered) slots have no master"]
    }

    func close() {
        schedule?.stop()
        node?.close()
    }

    /// Where to ask: the seeds first, then every node of the map (a seed may be gone for good).
    private var candidates: [RedisAddress] {
        var seen = Set<RedisAddress>()
        var out: [RedisAddress] = []
        let known = (map?.shards ?? []).flatMap { [$0.master] + $0.replicas }
        for a in context.topology.seeds + known where seen.insert(a).inserted { out.append(a) }
        return out
    }

    private func refresh(_ done: @escaping () -> Void) {
        guard node.isReady else { return done() }  // `onReady` asks again
        node.send(["CLUSTER", "INFO"]) { [weak self] result in
            guard let self else { return done() }
            if case .success(let v) = result, let text = v.string,
                let line = text.split(whereSeparator: \.isNewline).first(where: {
                    $0.hasPrefix("cluster_current_epoch:")
                }),
                let epoch = Int(line.dropFirst("cluster_current_epoch:".count).prefix { $0.isNumber })
            {
                guard epoch >= self.knownEpoch else {
                    self.lastError = "a node behind the cluster (epoch \(epoch) < \(self.knownEpoch))"
                    self.node.moveOn()
                    return done()
                }
                self.knownEpoch = epoch
            }
            self.readMap(done)
        }
    }

    private func readMap(_ done: @escaping () -> Void) {
        guard node.isReady else { return done() }
        let command: [RedisArg] = useSlots ? ["CLUSTER", "SLOTS"] : ["CLUSTER", "SHARDS"]
        node.send(command) { [weak self] result in
            defer { done() }
            guard let self else { return }
            switch result {
            case .success(let reply):
                guard let next = self.useSlots ? RedisSlotMap.parse(slots: reply) : RedisSlotMap.parse(shards: reply)
                else {
                    self.lastError = "unreadable \(self.useSlots ? "CLUSTER SLOTS" : "CLUSTER SHARDS") reply"
                    return self.node.moveOn()
                }
                self.apply(next)
            case .failure(let e):
                self.lastError = "\(e)"
                if !self.useSlots, e.serverCode == "ERR", "\(e)".contains("nknown") {
                    self.useSlots = true  // Redis before 7.0
                    self.schedule.soon()
                } else if case .server = e {
                    self.node.moveOn()  // e.g. a node that is not in cluster mode, or still loading
                }
            }
        }
    }

    private func apply(_ next: RedisSlotMap) {
        lastError = nil
        let previous = map
        map = next
        context.report(.topologyRefreshed(masters: next.masters.count))
        if let previous {
            for old in previous.masters where !next.masters.contains(old) {
                let promoted = previous.replicas(of: old).first { next.masters.contains($0) }
                if let promoted { context.report(.failover(from: old, to: promoted)) }
            }
        }
        if previous != next { context.changed() }
    }
}
