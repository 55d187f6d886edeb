import EventHTTP

/// One master as a client sees it (for `/readyz` and logs).
public struct RedisMasterStatus: Sendable, Equatable {
    /// Where it is.
    public var address: RedisAddress
    /// True when this loop's connection to it is ready and not silent.
    public var connected: Bool
    /// Replicas connected to it (`ROLE`, read every `topologyRefreshInterval`); nil until known.
    public var replicas: Int?
}

extension RedisClient {
    /// Every master, connected or not, with its replicas. Loop thread only.
    public var masterStatus: [RedisMasterStatus] {
        masters.map { m in
            RedisMasterStatus(
                address: m, connected: connectionIfAny(to: m)?.isAnswering == true, replicas: replicaCounts[m])
        }
    }

    /// What is wrong, one sentence each (empty when all is well): the topology not known, a master not
    /// connected, a master with fewer than `wantedReplicas` connected replicas. Loop thread only.
    public func problems(wantedReplicas: Int = 0) -> [String] {
        var out = locator.problems
        for s in masterStatus {
            if !s.connected { out.append("master \(s.address) not connected") }
            if wantedReplicas > 0, let n = s.replicas, n < wantedReplicas {
                out.append("master \(s.address) has \(n) connected replicas, \(wantedReplicas) wanted")
            }
        }
        return out
    }

    /// `problems(wantedReplicas:)` from any thread (hops to the loop).
    public func problems(wantedReplicas: Int = 0) async -> [String] {
        await withCheckedContinuation { k in
            loop.execute { [self] in k.resume(returning: problems(wantedReplicas: wantedReplicas)) }
        }
    }

    /// Reads every connected master's replicas with `ROLE` (`master`, offset, one entry per replica).
    func countReplicas() {
        for m in masters {
            guard let c = connectionIfAny(to: m), c.state == .ready else { continue }
            c.send(["ROLE"]) { [weak self] r in
                guard case .success(let v) = r, let a = v.array, a.count >= 3, a[0].string == "master",
                    let replicas = a[2].array
                else { return }
                self?.setReplicaCount(replicas.count, of: m)
            }
        }
    }
}
