import EventLoop

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
    /// connected, a master with fewer than `wantedReplicas` connected replicas (saying what its commits do
    /// meanwhile: wait for those it has, or, `replicaAcksStrict`, are refused). Loop thread only.
    public func problems(wantedReplicas: Int = 0) -> [String] {
        var out = locator.problems
        for s in masterStatus {
            if !s.connected { out.append("master \(s.address) not connected") }
            if wantedReplicas > 0, let n = s.replicas, n < wantedReplicas {
                let meanwhile =
                    options.replicaAcksStrict
                    ? "its commits are refused" : "its commits wait for the \(n) it has"
                out.append(
                    "master \(s.address) has \(n) connected replicas, \(wantedReplicas) wanted: \(meanwhile)")
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

    /// True when this loop can serve some of its sessions: the topology is known and at least one master
    /// is connected (with `replicaAcksStrict`, one with `wantedReplicas` connected replicas, or not known
    /// yet). One master missing or short of replicas concerns only the sessions it serves. Loop thread only.
    /// `delivers` adds a condition on each master (its subscriptions work).
    public func servesSomeMaster(wantedReplicas: Int = 0, delivers: (RedisAddress) -> Bool = { _ in true }) -> Bool {
        masterStatus.contains { s in
            s.connected && (!options.replicaAcksStrict || (s.replicas ?? wantedReplicas) >= wantedReplicas)
                && delivers(s.address)
        }
    }

    /// Reads every connected master's replicas with `ROLE` (`master`, offset, one entry per replica).
    func countReplicas() {
        for m in masters { countReplicas(of: m) }
    }

    /// Reads `master`'s connected replicas with `ROLE` (Redis lists only replicas online). Loop thread only.
    func countReplicas(of master: RedisAddress) {
        guard let c = connectionIfAny(to: master), c.state == .ready else { return }
        shortMasters[master]?.readAt = monotonicNanos()
        readReplicas(of: master, on: c) {}
    }

    /// Sends `ROLE` on `connection` (one to `master`), records the replicas its answer lists (`master`,
    /// offset, one entry per online replica), then calls `done` on the loop, whatever the answer was.
    func readReplicas(of master: RedisAddress, on connection: RedisConnection, then done: @escaping () -> Void) {
        connection.send(["ROLE"]) { [weak self] r in
            if case .success(let v) = r, let a = v.array, a.count >= 3, a[0].string == "master",
                let replicas = a[2].array
            {
                self?.setReplicaCount(replicas.count, of: master)
            }
            done()
        }
    }

    /// `master` had fewer replicas than a command wanted: its replicas are read every second until it has
    /// enough (a replica that comes back is waited for again), not only every `topologyRefreshInterval`.
    func noteShort(_ master: RedisAddress, wanted: Int) {
        let before = shortMasters[master]
        shortMasters[master] = (before?.readAt ?? monotonicNanos(), max(wanted, before?.wanted ?? 0))
    }

    /// Every `failoverPollInterval`: the short masters' replicas read again once a second.
    func recountShortMasters() {
        guard !shortMasters.isEmpty else { return }
        let now = monotonicNanos()
        for (m, short) in shortMasters where now &- short.readAt >= 1_000_000_000 {
            guard masters.contains(m) else {
                shortMasters[m] = nil
                continue
            }
            countReplicas(of: m)
        }
    }
}
