import EventLoop

/// The client's connections: one per master and lane (`RedisLane`; the command connection made when a
/// master is learnt, the others on first use), watched, and retired when it is no longer a master. Loop
/// thread only, like the client.
extension RedisClient {
    /// This loop's command connection to `address`, if it has one.
    func connectionIfAny(to address: RedisAddress) -> RedisConnection? { pool[address] }

    /// Records `master`'s connected replicas; a short master that has enough again is no longer read every
    /// second (the next shortfall a command meets notes it again).
    func setReplicaCount(_ n: Int, of master: RedisAddress) {
        replicaCounts[master] = n
        if let short = shortMasters[master], n >= short.wanted { shortMasters[master] = nil }
    }

    /// This loop's connection to `address` for `lane` (made and started if there is none).
    func connection(to address: RedisAddress, lane wanted: RedisLane) -> RedisConnection {
        let lane = wanted == .replicated && !options.separateWaitConnection ? .commands : wanted
        if let c = lane == .commands ? pool[address] : lanePools[lane]?[address] { return c }
        let c = RedisConnection(loop: loop, configuration: topology.configuration(for: address), logger: logger)
        c.healthCheckInterval = topology.node.healthCheckInterval
        c.onRoundTrip = onRoundTrip
        c.onEvent = { [weak self] in self?.report(.connection(address, $0)) }
        c.onStateChange = { [weak self, weak c] state in
            guard let self, let c else { return }
            self.connectionChanged(c, at: address, state)
        }
        c.onSilence = { [weak self, weak c] silent in
            guard let self, let c else { return }
            self.silenceChanged(c, at: address, silent)
        }
        if lane == .commands { pool[address] = c } else { lanePools[lane, default: [:]][address] = c }
        fresh.insert(ObjectIdentifier(c))
        c.start()
        return c
    }

    func connectionChanged(_ c: RedisConnection, at address: RedisAddress, _ state: RedisConnectionState) {
        let id = ObjectIdentifier(c)
        switch state {
        case .ready:
            fresh.remove(id)
            if pool[address] === c {
                load(preloaded.withLock { $0 }, on: c)
                countReplicas(of: address)  // a new master (a promoted replica) may have fewer than before
            }
            let held = waiters.removeValue(forKey: id) ?? []
            for w in held {
                w.timer.cancel()
                route(w.request)
            }
        case .disconnected, .closed:
            failWaiters(of: c, .unavailable("master \(address) could not be reached"))
            if locator.masters.contains(address) { locator.suspect("master \(address) down") }
        case .connecting: break
        }
        updateReadiness()
    }

    /// A connection fell silent (Redis's host acknowledges, Redis answers nothing) or was answered again.
    /// Silent: not ready, and the locator looks again (a failover may be under way); new commands wait for
    /// it within their deadlines (`route`). Answered again: they are written.
    func silenceChanged(_ c: RedisConnection, at address: RedisAddress, _ silent: Bool) {
        if silent {
            if locator.masters.contains(address) { locator.suspect("master \(address) silent") }
        } else {
            for w in waiters.removeValue(forKey: ObjectIdentifier(c)) ?? [] {
                w.timer.cancel()
                route(w.request)
            }
        }
        updateReadiness()
    }

    /// Keeps `request` until `connection` is ready (or answers again), within its deadline.
    func hold(_ request: Request, for connection: RedisConnection) {
        let id = ObjectIdentifier(connection)
        let seconds = Double(request.deadline &- min(request.deadline, monotonicNanos())) / 1e9
        let timer = loop.schedule(after: max(0.001, seconds)) { [weak self] in self?.expireWaiters(of: id) }
        waiters[id, default: []].append(Waiter(request: request, timer: timer))
    }

    /// Fails the requests held for connection `id` whose deadline has passed. Each held request's timer
    /// calls this at its deadline; libevent's clock (coarse, cached) may run it a few milliseconds before
    /// that, and then none is due: it looks again at the earliest deadline, or that request would be held
    /// past it until the connection changed (a stopped master's commands waited well past their time-out).
    func expireWaiters(of id: ObjectIdentifier) {
        guard let list = waiters[id] else { return }
        let now = monotonicNanos()
        let (late, rest) = (list.filter { $0.request.deadline <= now }, list.filter { $0.request.deadline > now })
        waiters[id] = rest.isEmpty ? nil : rest
        if late.isEmpty, let earliest = rest.map(\.request.deadline).min() {
            _ = loop.schedule(after: max(0.001, Double(earliest - now) / 1e9)) { [weak self] in
                self?.expireWaiters(of: id)
            }
        }
        for w in late {
            w.timer.cancel()
            w.request.done(.failure(.timeout), nil)
        }
    }

    func failWaiters(of c: RedisConnection, _ error: RedisError) {
        for w in waiters.removeValue(forKey: ObjectIdentifier(c)) ?? [] {
            w.timer.cancel()
            if case .unavailable(let why) = error { report(.unavailable(nil, reason: why)) }
            w.request.done(.failure(error), nil)
        }
    }

    /// The masters may have changed: connect to new ones, retire the others, tell the observers.
    func topologyChanged() {
        guard !closed else { return }
        let masters = Set(locator.masters)
        for m in masters { _ = connection(to: m, lane: .commands) }
        for (address, c) in pool where !masters.contains(address) {
            pool[address] = nil
            retire(c)
        }
        for (lane, connections) in lanePools {
            for (address, c) in connections where !masters.contains(address) {
                lanePools[lane]?[address] = nil
                retire(c)
            }
        }
        updateReadiness()
        for observe in topologyObservers { observe() }
    }

    /// No new commands go to `c`; its waiting commands are routed again, and it is closed once the
    /// replies of those in flight had time to come.
    func retire(_ c: RedisConnection) {
        c.onStateChange = nil
        c.onSilence = nil
        fresh.remove(ObjectIdentifier(c))
        for w in waiters.removeValue(forKey: ObjectIdentifier(c)) ?? [] {
            w.timer.cancel()
            route(w.request)
        }
        loop.schedule(after: topology.node.commandTimeout) { c.close() }
    }

    /// Every `failoverPollInterval`: a master whose connection is down makes the locator look again.
    func watch() {
        updateReadiness()
        recountShortMasters()
        for m in locator.masters where pool[m]?.isAnswering != true {
            locator.suspect("master \(m) not connected")
            break
        }
    }

    func updateReadiness() {
        let masters = locator.masters
        let ready =
            !closed && !masters.isEmpty && locator.problems.isEmpty
            && masters.allSatisfy { pool[$0]?.isAnswering == true }
        readyFlag.store(ready, ordering: .relaxed)
    }
}
