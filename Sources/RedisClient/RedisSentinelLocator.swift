import EventLoop
import Logging

/// Redis Sentinel: the master's address, asked of the sentinels (`SENTINEL get-master-addr-by-name`,
/// the first that answers, moving on when one is gone), again every `topologyRefreshInterval`, soon after
/// anything suspicious (the master is down, `READONLY` from a demoted master), and at once when the
/// sentinel announces `+switch-master` on the subscription this locator keeps on the same sentinel.
///
/// Threading: loop-bound like its client.
final class RedisSentinelLocator: RedisMasterLocator {
    private let name: String
    private var context: RedisLocatorContext!
    private var sentinel: RedisRotatingConnection!
    private var watch: RedisPubSubConnection?
    private var schedule: RedisRefreshSchedule!
    private var lastError: String?
    /// What the sentinels' answers and announcements established (which are believed: `SentinelAnswers`).
    private var answers = SentinelAnswers()

    /// A locator of the master named `name`.
    init(name: String) { self.name = name }

    var isSharded: Bool { false }

    private var master: RedisAddress? { answers.master }

    func master(forSlot slot: Int) -> RedisAddress? { master }

    var masters: [RedisAddress] { master.map { [$0] } ?? [] }

    /// The sentinel it asks now (nil before the first connection).
    var sentinelAddress: RedisAddress? { sentinel?.address }

    func start(_ context: RedisLocatorContext) {
        self.context = context
        let sentinelConfiguration = { (a: RedisAddress) -> RedisConfiguration in
            var c = RedisConfiguration(host: a.host, port: a.port)  // no AUTH, no SELECT: sentinels have neither
            c.commandTimeout = context.topology.node.commandTimeout
            c.connectTimeout = context.topology.node.connectTimeout
            c.reconnectBase = context.topology.node.reconnectBase
            c.reconnectMax = context.topology.node.reconnectMax
            return c
        }
        sentinel = RedisRotatingConnection(
            loop: context.loop, candidates: { context.topology.seeds }, configuration: sentinelConfiguration,
            pause: context.options.failoverPollInterval, logger: context.logger)
        schedule = RedisRefreshSchedule(
            loop: context.loop, every: context.options.topologyRefreshInterval,
            minimum: context.options.failoverPollInterval
        ) { [weak self] done in
            guard let self else { return done() }
            self.refresh(done)
        }
        sentinel.onReady = { [weak self] in
            guard let self else { return }
            self.schedule.soon()
            if context.options.watchSentinels, let at = self.sentinel.address {
                self.watch(at, sentinelConfiguration(at))
            }
        }
        sentinel.start()
        schedule.start()
    }

    func suspect(_ reason: String) { schedule?.soon() }

    func moved(slot: Int, to address: RedisAddress) {}

    var problems: [String] {
        master == nil ? ["no master address from the sentinels yet" + (lastError.map { " (\($0))" } ?? "")] : []
    }

    func close() {
        schedule?.stop()
        sentinel?.close()
        watch?.close()
    }

    /// Subscribes to `+switch-master` on the sentinel at `address` (again after each reconnect).
    private func watch(_ address: RedisAddress, _ configuration: RedisConfiguration) {
        if let watch, watch.address == address { return }
        watch?.close()
        let w = RedisPubSubConnection(loop: context.loop, configuration: configuration, logger: context.logger)
        watch = w
        w.onStateChange = { [weak w] state in
            guard state == .ready, let w else { return }
            w.send(.subscribe, "+switch-master") { _ in }
        }
        w.onMessage = { [weak self] message, _ in
            // "<name> <old ip> <old port> <new ip> <new port>"
            let parts = String(decoding: message.payload, as: UTF8.self).split(separator: " ")
            guard let self, parts.count == 5, parts[0] == self.name, let port = Int(parts[4]) else { return }
            self.apply(self.answers.announced(RedisAddress(host: String(parts[3]), port: port)))
        }
        w.start()
    }

    /// Asks the sentinel for the master with `SENTINEL MASTER` (its address and its `config-epoch`). An
    /// answer `SentinelAnswers` finds stale (a sentinel that has not heard of the last failover, or one
    /// still naming the master just replaced) is not used: the next sentinel is asked.
    private func refresh(_ done: @escaping () -> Void) {
        guard sentinel.isReady else { return done() }  // `onReady` asks again
        sentinel.send(["SENTINEL", "MASTER", RedisArg(name)]) { [weak self] result in
            defer { done() }
            guard let self else { return }
            switch result {
            case .success(let reply):
                var fields: [String: String] = [:]
                let items = reply.array ?? []
                for i in stride(from: 0, to: items.count - 1, by: 2) {
                    if let k = items[i].string, let v = items[i + 1].string { fields[k] = v }
                }
                guard let host = fields["ip"], let port = fields["port"].flatMap({ Int($0) }) else {
                    self.lastError = "the sentinel does not know master '\(self.name)'"
                    return self.sentinel.moveOn()
                }
                let epoch = fields["config-epoch"].flatMap { Int($0) } ?? 0
                let decision = self.answers.answer(
                    RedisAddress(host: host, port: port), epoch: epoch, sentinels: self.context.topology.seeds.count)
                if case .stale(let reason) = decision {
                    self.lastError = reason
                    return self.sentinel.moveOn()
                }
                self.lastError = nil
                self.context.report(.topologyRefreshed(masters: 1))
                self.apply(decision)
            case .failure(let e):
                self.lastError = "\(e)"
                if case .server = e { self.sentinel.moveOn() }
            }
        }
    }

    /// Acts on a decision of `answers`: a switch is logged (with the epoch it was taken at), counted as a
    /// failover when there was a master before, and handed to the client.
    private func apply(_ decision: SentinelAnswers.Decision) {
        guard case .switchTo(let address) = decision else { return }
        if let old = answers.left?.address {
            context.logger.warning(
                "redis master switched",
                metadata: ["from": "\(old)", "to": "\(address)", "config-epoch": "\(answers.knownEpoch)"])
            context.report(.failover(from: old, to: address))
        }
        context.changed()
    }
}
