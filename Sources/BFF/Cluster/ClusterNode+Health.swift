import CoreMetrics
import EventHTTP
import RedisClient

/// What one loop last found of Redis: the problems (one sentence each) and whether it can serve some
/// sessions all the same (a master it reaches and whose subscriptions deliver). Nothing is served before
/// the first reading.
struct LoopRedisHealth: Equatable {
    var problems: [String] = []
    var servesSome = false
    /// Masters with fewer connected replicas than `--redis-replica-acks`, and how many each has (as this
    /// loop last read them).
    var shortOfReplicas: [String: Int] = [:]
}

/// Cluster mode's view of Redis's health: every `healthInterval` each loop reads what its client and
/// subscriber find wrong (`problems`: the topology not known, a master not connected, a subscription
/// down or deaf, a master with fewer connected replicas than `--redis-replica-acks`) and whether it can
/// serve some sessions all the same, for `/readyz` (its status and body), the `bff_redis_problems` and
/// `bff_redis_masters_short_of_replicas` gauges and the log (each change, once); and each client event is
/// counted in `/metrics` (`bff_redis_<counter>_total`) and logged where an operator needs it.
extension ClusterNode {
    /// Seconds between two readings of a loop's Redis problems.
    static let healthInterval = 0.25

    /// Starts each loop's periodic reading of its problems (at start).
    func startHealthChecks() {
        for (i, client) in clients.enumerated() {
            let subscriber = subscribers[i]
            let state = perLoop[i]
            let wanted = settings.replicaAcks
            client.loop.execute {
                state.value.healthTimer = client.loop.scheduleRepeating(every: Self.healthInterval) { [unowned self] in
                    let now = client.problems(wantedReplicas: wanted) + subscriber.problems
                    let serves = client.servesSomeMaster(wantedReplicas: wanted) { subscriber.delivers(from: $0) }
                    var short: [String: Int] = [:]
                    for s in client.masterStatus where wanted > 0 {
                        if let n = s.replicas, n < wanted { short["\(s.address)"] = n }
                    }
                    let (before, total, shortNow) = self.loopHealth.withLock { h -> ([String], Int, [String: Int]) in
                        let old = h[i].problems
                        h[i] = LoopRedisHealth(problems: now, servesSome: serves, shortOfReplicas: short)
                        let all = h.reduce(into: [String: Int]()) { $0.merge($1.shortOfReplicas) { min($0, $1) } }
                        return (old, h.reduce(0) { $0 + $1.problems.count }, all)
                    }
                    guard now != before else { return }
                    self.metrics.redisProblems.set(total)
                    self.metrics.redis.setShortOfReplicas(shortNow, wanted: wanted)
                    for p in now where !before.contains(p) {
                        self.logger.warning("redis problem", metadata: ["loop": "\(i)", "problem": "\(p)"])
                    }
                    for p in before where !now.contains(p) {
                        self.logger.info("redis problem solved", metadata: ["loop": "\(i)", "problem": "\(p)"])
                    }
                }
            }
        }
    }

    /// One event of loop `i`'s client or subscriber (on that loop): counted, and logged when it matters.
    /// Failovers and topology refreshes are seen by every loop on its own: counted from loop 0 only.
    func clientEvent(_ event: RedisClientEvent, loop i: Int) {
        switch event {
        case .failover(let from, let to):
            guard i == 0 else { return }
            logger.warning("redis failover: a replica took over", metadata: ["from": "\(from)", "to": "\(to)"])
        case .topologyRefreshed:
            guard i == 0 else { return }
        case .replicaAckTimeout(let master, let acknowledged, let wanted):
            let t = env.now()
            if let last = perLoop[i].value.ackTimeoutLoggedAt, t - last < 10 { break }
            perLoop[i].value.ackTimeoutLoggedAt = t
            logger.warning(
                "redis replicas did not confirm a commit in time: answered 503",
                metadata: ["master": "\(master)", "acknowledged": "\(acknowledged)", "wanted": "\(wanted)"])
        case .subscriptionRecovered(let at):
            logger.info("redis subscription delivers again", metadata: ["redis": "\(at)"])
        default: break
        }
        metrics.redisEvent(event)
    }
}

/// The counters of `RedisClientMetrics` as Prometheus counters (`bff_redis_<name>_total`), and the gauge
/// of problems now, in the application's registry.
final class RedisHealthMetrics: Sendable {
    private let counters: [RedisClientMetrics.Counter: CoreMetrics.Counter]
    /// `bff_redis_problems`: what `/readyz` names now, summed over the loops (0 when all is well).
    let problems: Meter
    /// `bff_redis_masters_short_of_replicas`: masters with fewer connected replicas than
    /// `--redis-replica-acks` (their commits wait for those they have, or are refused when strict).
    let mastersShortOfReplicas: Meter
    /// `bff_redis_master_missing_replicas{master}`: per master ever short, how many replicas it lacks
    /// now (0 once it has enough again): the metric that names it.
    private let missingReplicas = Lock<[String: Meter]>([:])
    private let factory: MetricsFactory

    init(factory f: MetricsFactory) {
        factory = f
        var counters: [RedisClientMetrics.Counter: CoreMetrics.Counter] = [:]
        for c in RedisClientMetrics.Counter.allCases {
            counters[c] = CoreMetrics.Counter(label: "bff_redis_\(c.rawValue)_total", factory: f)
        }
        self.counters = counters
        problems = Meter(label: "bff_redis_problems", factory: f)
        problems.set(0)
        mastersShortOfReplicas = Meter(label: "bff_redis_masters_short_of_replicas", factory: f)
        mastersShortOfReplicas.set(0)
    }

    /// The masters short of the `wanted` replicas now, with the replicas each has (any thread).
    func setShortOfReplicas(_ short: [String: Int], wanted: Int) {
        mastersShortOfReplicas.set(short.count)
        missingReplicas.withLock { meters in
            for master in Set(meters.keys).union(short.keys) {
                let meter =
                    meters[master]
                    ?? Meter(
                        label: "bff_redis_master_missing_replicas", dimensions: [("master", master)], factory: factory)
                meters[master] = meter
                meter.set(short[master].map { wanted - $0 } ?? 0)
            }
        }
    }

    /// Counts `event` in its counter, if it has one.
    func count(_ event: RedisClientEvent) {
        guard let c = RedisClientMetrics.counter(of: event) else { return }
        counters[c]?.increment()
    }
}
