import ClusterRedis
import ClusterStore
import EventHTTP
import RedisClient

/// Cluster mode's per-client session limits (the contract's "Fair use"), counted across the cluster: a
/// creation passes this node's own limits first (`SessionEnvironment.reserveSession(for:)`: no Redis work
/// for a flood this node already refuses), then the client's bucket and live count in Redis
/// (`RedisClientLedger`), so a client spread over N nodes by a load balancer gets its limits once.
/// Sessions run here are kept counted by a refresh every `clientRefreshInterval`; see docs/CLUSTER.md,
/// "Per-client limits across the cluster".
extension ClusterNode {
    /// Seconds between two refreshes of a loop's counted sessions; a session stops counting three intervals
    /// after its node last refreshed it (a dead node's sessions, one that moved).
    static let clientRefreshInterval = 20.0

    /// Asks the cluster whether `client` (the key this node counts it under) may create session `id`, on
    /// loop `index`; `done(nil)` when it may. A Redis error admits the creation (this node's own limits
    /// held, and the creation itself needs Redis: it fails there if Redis is gone).
    func reserveAcrossCluster(
        _ client: ClientAddress, session id: String, at index: Int, _ done: @escaping (SessionFailure?) -> Void
    ) {
        let configuration = env.configuration
        ledgers[index].reserve(client: client.description, session: id) { result in
            switch result {
            case .success(.allowed):
                done(nil)
            case .success(.rate(let ms)):
                self.env.metrics.clientRefusals(limit: "rate")
                let seconds = max(1, (ms + 999) / 1000)
                done(.clientCreationRate(retryAfterSeconds: seconds, perSecond: configuration.clientSessionRate))
            case .success(.live(let max)):
                self.env.metrics.clientRefusals(limit: "live")
                done(.clientSessionLimit(max))
            case .failure(let error):
                self.metrics.redisErrors.increment()
                let state = self.perLoop[index]
                state.value.ledgerFailures += 1
                let now = self.env.now()
                if now - (state.value.ledgerFailuresLoggedAt ?? -.infinity) >= 10 {
                    self.logger.warning(
                        "per-client limits not counted across the cluster; creations admitted on this node's own",
                        metadata: ["error": "\(error)", "creations": "\(state.value.ledgerFailures)"])
                    state.value.ledgerFailures = 0
                    state.value.ledgerFailuresLoggedAt = now
                }
                done(nil)
            }
        }
    }

    /// True when loop `index` may start new work on the master of `key` (a creation, a stream): fewer than
    /// `admissionInFlight` commands wait on its connection there, counting the commits queued behind this
    /// loop's batch in flight (`RedisSessionStore.commitsWaiting`). Else counted; the caller answers `.busy`
    /// before sending anything (loop `index` only).
    func admits(key: String, at index: Int) -> Bool {
        let waiting = clients[index].commandsInFlight(key: RedisArg(key)) + stores[index].commitsWaiting(key: key)
        guard waiting >= settings.admissionInFlight else { return true }
        metrics.admissionRefusals.increment()
        return false
    }

    /// Starts, on every loop, the refresh that keeps the sessions run there counted against their clients.
    func startClientRefreshes() {
        for (i, client) in clients.enumerated() {
            let state = perLoop[i]
            client.loop.execute { [unowned self] in
                state.value.clientRefreshTimer = client.loop.scheduleRepeating(every: Self.clientRefreshInterval) {
                    self.refreshClientCounts(loop: i) { _ in }
                }
            }
        }
    }

    /// Keeps the sessions loop `i` runs counted against their clients (loop `i` only); `done` tells
    /// whether Redis took every refresh.
    func refreshClientCounts(loop i: Int, _ done: @escaping (Bool) -> Void) {
        var byClient: [String: [String]] = [:]
        for (id, owned) in perLoop[i].value.owned {
            guard let c = owned.session.countedClient, !owned.session.isEnded else { continue }
            byClient[c.description, default: []].append(id)
        }
        ledgers[i].refresh(byClient.map { (client: $0.key, sessions: $0.value) }) { r in
            if case .failure(let e) = r {
                self.metrics.redisErrors.increment()
                self.logger.warning("per-client session counts not refreshed", metadata: ["error": "\(e)"])
            }
            done((try? r.get()) != nil)
        }
    }
}
