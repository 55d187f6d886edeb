import ClusterStore
import EventHTTP
import JSON
import Logging
import RedisClient
import ViewModels

/// Cluster mode's sessions (`ClusterNode` as the `SessionBackend`) and their ownership (see
/// docs/CLUSTER.md, "The session layer in cluster mode").
///
/// - A session runs on the loop its id names (modulo this node's loops) of the node holding its lease.
/// - Every change is a fenced commit; an input's `202` is sent only once its commit succeeded.
/// - An input at a node that does not hold the lease: if the lease is free (expired, released), this
///   node takes the session over (restores its view models from the stored state); while another node
///   holds a live lease it is forwarded to that node through Redis (`ClusterForwarding.swift`).
/// - `GET /state` answers from the store's committed snapshot; streams on every node are fed by the
///   session's Redis channel with `StreamCatchUp`.
extension ClusterNode {
    /// The loop that runs session `id` on this node (the index its id names, modulo this node's loops:
    /// another node may have more), or nil when `id` cannot be a session id.
    func owner(of id: String) -> LoopSessions? {
        SessionID.loopIndex(of: id, loops: 1000).map { loopSessions[$0 % loopSessions.count] }
    }

    // MARK: create

    /// A session of `person`'s login carries the person in its stored form (a node taking it over knows
    /// whose it is) and is listed in the login's set of sessions (a sign-out on any node ends it).
    func create(
        at host: LoopSessions, client: ClientAddress, person: SignedInPerson?,
        reply: @escaping @Sendable (Result<String, SessionFailure>) -> Void
    ) {
        let index = host.loop.index
        // A new session needs no particular master: one whose master is missing or short of replicas is
        // drawn again, so one shard's trouble does not refuse new sessions (a few tries: ids are random).
        var id = SessionID.make(loop: index)
        for _ in 0..<8 where !clients[index].canServe(key: RedisArg(keys.session(id)), replicas: settings.replicaAcks) {
            id = SessionID.make(loop: index)
        }
        guard admits(key: keys.session(id), at: index) else { return reply(.failure(.busy)) }
        let counted: ClientAddress
        switch env.reserveSession(for: client) {
        case .failure(let f): return reply(.failure(f))
        case .success(let key): counted = key
        }
        reserveAcrossCluster(counted, session: id, at: index) { refusal in
            if let refusal {
                self.env.cancelReservation(client: counted)
                return reply(.failure(refusal))
            }
            self.createCounted(id, at: host, client: client, counted: counted, person: person, reply: reply)
        }
    }

    /// `create` once the client's limits (this node's and the cluster's) allowed session `id`.
    private func createCounted(
        _ id: String, at host: LoopSessions, client: ClientAddress, counted: ClientAddress, person: SignedInPerson?,
        reply: @escaping @Sendable (Result<String, SessionFailure>) -> Void
    ) {
        let index = host.loop.index
        let session = Session(
            id: id, owner: host, viewModels: env.makeViewModels(host.executor, client.description, person),
            now: env.now(), client: counted, person: person)
        stores[index].create(sessionID: id, holder: holders[index], state: session.storedForm()) { result in
            switch result {
            case .success(let lease):
                self.adopt(session, lease: lease, committedInputSeq: 0, tookOver: false, owner: host)
                guard let person else { return reply(.success(id)) }
                self.listSession(id, ofLogin: person.loginKey, at: index) { reply(.success(id)) }
            case .failure(let error):
                self.failed(error)
                session.end(reason: "moved")
                self.env.sessionEnded(reason: "moved", client: counted)
                self.ledgers[index].release(client: counted.description, session: id)
                reply(.failure(SessionFailure(error)))
            }
        }
    }

    // MARK: ownership

    /// Makes `session` one this loop runs under `lease`: its events go to commits, its lease is renewed.
    @discardableResult
    func adopt(
        _ session: Session, lease: Lease, committedInputSeq: Int, tookOver: Bool, owner: LoopSessions
    ) -> OwnedSession {
        let owned = OwnedSession(
            session: session, node: self, lease: lease, committedInputSeq: committedInputSeq, tookOver: tookOver,
            now: env.now())
        let state = perLoop[owner.loop.index]
        state.value.heldElsewhere[session.id] = nil
        let store = stores[owner.loop.index]
        // The session keeps `owned` (and `owned` the session) until it ends: `Session.end` lets it go. One
        // reference, no closure per session (everything made here is kept as long as the session runs).
        session.custodian = owned
        // Renewals run in the loop's ~0.1 s slices (at most 0.1 s late: TTL/3 leaves two thirds of the
        // TTL): those of one slice are one round trip. One `LeaseKeeping` per loop: what every keeper shares.
        let keeping =
            state.value.keeping
            ?? LeaseKeeping(
                store: store, ttlSeconds: settings.leaseTTL, interval: settings.leaseTTL / 3,
                timers: state.value.renewals)
        state.value.keeping = keeping
        let keeper = LeaseKeeper(
            lease: lease, keeping: keeping, holder: owned)
        owned.keeper = keeper
        // Inputs that reach other nodes come here through Redis, on this loop's input channels, from now on.
        state.value.owned[session.id] = owned
        owner.add(session)
        keeper.start(firstDelay: Double.random(in: 0.5...1) * keeping.interval)  // spread, see start
        return owned
    }

    /// `owned`'s session ended on loop `index` (`SessionCustodian.sessionEnded`, that loop): its waiters are
    /// answered, its client's count drops (unless it moved or was handed over), and unless a newer run took
    /// its place, inputs forwarded here are answered `moved`, streams here fed by its commits follow whoever
    /// runs it next, and its lease is handed over (or, unused across the cluster, the session deleted).
    func ended(_ owned: OwnedSession, reason: String, loop index: Int) {
        let session = owned.session
        owned.failWaiters()
        // Ended for good (not moved to another node, where it stops counting on its own): the client's
        // count across the cluster drops at once. An unused session is gone for good only once deleted
        // (below); handed over instead, it stops counting on its own, like a moved one.
        let counted = session.countedClient
        let releaseCount = { [ledgers] in
            if let client = counted { ledgers[index].release(client: client.description, session: session.id) }
        }
        if reason != "moved", reason != "unused" { releaseCount() }
        let state = perLoop[index]
        guard state.value.owned[session.id] === owned else { return }
        state.value.owned[session.id] = nil  // inputs forwarded here from now on are answered `moved`
        // Streams here fed by this loop's commits now follow whoever runs the session next.
        if let fed = state.value.fed[session.id], fed.local {
            fed.follow(feeds[index], sessionID: session.id)
        }
        let keeper = owned.keeper
        owned.keeper = nil  // the keeper's onLost refers back to `owned`
        let metrics = self.metrics
        let handedOver: (Result<Bool, StoreError>) -> Void = { r in
            if case .success(true) = r { metrics.handOvers.increment() }
        }
        // Unused here (`--unused-session-timeout`): gone for good if unused across the cluster too (the
        // contract's unused session expires; Redis would keep it for the idle time-out and a later request
        // would bring it back); else handed over like any other, to a node that streams it.
        guard reason == "unused", let keeper else {
            keeper?.handOver(completion: handedOver)
            return
        }
        keeper.stop()
        let lease = keeper.lease
        let store = stores[index]
        store.deleteIfUnused(lease) { r in
            if case .success(true) = r { return releaseCount() }
            store.release(lease, completion: handedOver)
        }
    }

    /// `session` leaves this node (its lease was lost or a commit failed): it ends here as `moved`, and is
    /// restored from the store by whichever node runs it next (owner loop). Only this incarnation: a
    /// later acquisition may have put a fresh one in its place.
    func leave(_ session: Session) {
        guard session.owner.sessions[session.id] === session else { return }
        session.owner.remove(session.id, reason: "moved")
        metrics.moved.increment()
    }

    /// Commits the events effects and status changes emitted outside an input (owner loop).
    func flush(_ owned: OwnedSession) {
        owned.flushScheduled = false
        guard !owned.pending.isEmpty, !owned.session.isEnded else { return }
        commit(owned, isInput: false, idempotencyKey: nil) { _ in }
    }

    /// One fenced commit of `owned`'s pending events and current state; on failure the session leaves
    /// this node (its memory may be ahead of the store) and is restored from the store next time.
    func commit(
        _ owned: OwnedSession, isInput: Bool, idempotencyKey: String?,
        completion: @escaping (Result<CommitResult, StoreError>) -> Void
    ) {
        let s = owned.session
        let events = owned.pending
        owned.pending = []
        // The expiry is renewed by the first commit and then once per `expiryRenewalTenths`: the store runs
        // it no sooner than now, so the expiry it sets covers every commit until the next renewal is due.
        let now = UInt32(truncatingIfNeeded: Int64((env.now() * 10).rounded(.down)))
        let renews = owned.expiryRenewedAt == .max || now &- owned.expiryRenewedAt >= expiryRenewalTenths
        if renews { owned.expiryRenewedAt = now == .max ? 0 : now }
        let c = SessionCommit(
            lease: owned.lease, events: events, state: s.storedForm(memos: &owned.storedForms), isInput: isInput,
            idempotencyKey: idempotencyKey, renewsExpiry: renews)
        stores[s.owner.loop.index].commit(c) { result in
            switch result {
            case .success(let r):
                if let last = r.eventIDs.last, !s.isEnded { s.adoptCommitted(seq: Int(last)) }
                self.deliverLocally(s.id, events, ids: r.eventIDs, loop: s.owner.loop.index)
            case .failure(let error):
                self.failed(error)
                if error == .fenced { self.metrics.fenced.increment() }
                self.logger.warning("commit failed", metadata: ["session": "\(s.id)", "error": "\(error)"])
                if error == .fenced { owned.keeper?.stop() }
                self.leave(s)
            }
            completion(result)
        }
    }

    /// Runs `body` with the session this loop holds the lease of, acquiring it (a takeover when another
    /// holder had it) if the lease is free; otherwise calls `onHeld` (another node's live lease: its holder
    /// and remaining milliseconds) or `refuse`. With replica acks a lease this loop still holds but whose
    /// session it no longer runs (a commit failed or was not confirmed) is acquired with a new token: the
    /// events it may have shown under the old one can be lost in a failover, and new events must never be
    /// numbered from the rolled-back `seq` under the token they were shown with.
    func withOwned(
        _ id: String, owner: LoopSessions, refuse: @escaping (SessionFailure) -> Void,
        onHeld: @escaping (_ holder: String, _ remainingMilliseconds: Int) -> Void,
        _ body: @escaping (OwnedSession) -> Void
    ) {
        let state = perLoop[owner.loop.index]
        if let owned = state.value.owned[id] { return body(owned) }
        stores[owner.loop.index].acquire(
            sessionID: id, holder: holders[owner.loop.index], newToken: settings.replicaAcks > 0
        ) { result in
            if let owned = state.value.owned[id] { return body(owned) }  // acquired meanwhile here
            switch result {
            case .success(.acquired(let lease, let snapshot)):
                guard self.env.reserveSession() else {
                    self.stores[owner.loop.index].release(lease) { _ in }
                    return refuse(.sessionLimit(self.env.configuration.maxSessions))
                }
                // Whose the session is comes with its stored form: its view models are made for that person.
                let person = Session.person(inStoredForm: snapshot.state)
                let session = Session(
                    id: id, owner: owner, viewModels: self.env.makeViewModels(owner.executor, nil, person),
                    now: self.env.now(), person: person)
                do {
                    if !snapshot.state.isEmpty { try session.restore(from: snapshot.state) }
                } catch {
                    self.logger.error("stored state refused", metadata: ["session": "\(id)", "error": "\(error)"])
                    session.end(reason: "moved")
                    self.env.sessionEnded(reason: "moved")
                    self.stores[owner.loop.index].release(lease) { _ in }
                    return refuse(.unreadableState)
                }
                session.adoptCommitted(seq: Int(snapshot.seq), inputSeq: Int(snapshot.inputSeq))
                self.metrics.takeovers.increment()
                body(
                    self.adopt(
                        session, lease: lease, committedInputSeq: Int(snapshot.inputSeq), tookOver: true, owner: owner))
            case .success(.heldBy(let holder, let ms)):
                onHeld(holder, ms)
            case .failure(let error):
                self.failed(error)
                refuse(SessionFailure(error))
            }
        }
    }

    // MARK: inputs and deletes

    func input(_ input: SessionInput, at host: LoopSessions, reply: @escaping @Sendable (InputResult) -> Void) {
        let id = input.sessionID
        guard let owner = owner(of: id) else { return reply(.failure(.notFound)) }
        // The common case, a session run by the loop that took the request: applied at once, without the
        // hop's, the forward's and the acquisition's closures (the path below reaches `applyInput` too).
        if owner.loop.inEventLoop, let owned = perLoop[owner.loop.index].value.owned[id] {
            return applyInput(owned, input, reply: reply)
        }
        owner.loop.runOrExecute {
            let forwarded = ForwardedInput(
                sessionID: id, viewModel: input.viewModel, input: input.input, value: input.value,
                idempotencyKey: input.idempotencyKey, login: input.login)
            let answer: (RunnerAnswer) -> Void = { reply($0.inputResult) }
            // `acquire`, then apply here or forward; when the forward reaches nobody (the owner has just
            // released the session, or is not subscribed yet), `acquire` once more.
            func acquireFirst(retries: Int) {
                self.withOwned(
                    id, owner: owner, refuse: { reply(.failure($0)) },
                    onHeld: { holder, ms in
                        self.rememberHolder(id, holder: holder, remainingMilliseconds: ms, owner: owner)
                        self.forward(
                            forwarded, to: holder, owner: owner, remainingMilliseconds: ms,
                            onNobody: retries > 0 ? { acquireFirst(retries: retries - 1) } : nil, reply: answer)
                    }
                ) { owned in
                    self.applyInput(owned, input, reply: reply)
                }
            }
            self.forwardToKnownHolder(forwarded, owner: owner, reply: answer) {
                acquireFirst(retries: 1)
            }
        }
    }

    /// Applies one input to a session run here and answers once it is committed (owner loop). A key this run
    /// does not remember is looked up in the store first only when the store may hold it: the run took the
    /// session over from the store less than an idempotency window ago (an earlier run's keys are there, not
    /// here), or the session forgot a key of the window to make room (`Session.remembersEveryRecentKey`).
    /// Otherwise this run has seen every key the store could hold: a browser's inputs (each with its key)
    /// cost one round trip, the commit, instead of two.
    func applyInput(_ owned: OwnedSession, _ input: SessionInput, reply: @escaping (InputResult) -> Void) {
        let s = owned.session
        guard s.handle.admits(input.login) else { return reply(.failure(.notFound)) }
        let now = env.now()
        guard let key = input.idempotencyKey,
            !s.remembersEveryRecentKey(now: now)
                || owned.storeMayHoldUnseenKeys(now: now, window: env.configuration.idempotencyWindow)
        else {
            return offer(input, to: owned, reply: reply)
        }
        stores[s.owner.loop.index].inputSeq(sessionID: s.id, idempotencyKey: key) { result in
            switch result {
            case .success(let seen?): reply(.success(.duplicate(inputSeq: Int(seen))))
            case .success(nil): self.offer(input, to: owned, reply: reply)
            case .failure(let error):
                self.failed(error)
                reply(.failure(SessionFailure(error)))
            }
        }
    }

    /// `applyInput` once the store is known not to hold the input's key (owner loop).
    private func offer(_ input: SessionInput, to owned: OwnedSession, reply: @escaping (InputResult) -> Void) {
        let key = input.idempotencyKey
        let outcome = owned.session.offer(
            viewModel: input.viewModel, input: input.input, value: input.value, idempotencyKey: key, now: env.now())
        switch outcome {
        case .accepted(let n):
            commit(owned, isInput: true, idempotencyKey: key) { result in
                switch result {
                case .success(let r):
                    let seq = r.inputSeq.map { Int($0) } ?? n
                    if seq != n {
                        self.logger.error(
                            "inputSeq differs from the store's", metadata: ["local": "\(n)", "store": "\(seq)"])
                    }
                    owned.acknowledged(seq)
                    reply(.success(.accepted(inputSeq: seq)))
                case .failure(let error):
                    reply(.failure(SessionFailure(error)))
                }
            }
        case .duplicate(let n) where n > owned.committedInputSeq:
            // The first attempt's commit is still in flight: answer when it lands.
            owned.waiters.append((n, { ok in reply(ok ? .success(.duplicate(inputSeq: n)) : .failure(.moved)) }))
        default:
            reply(.success(outcome))
        }
    }

    func delete(
        _ id: String, login: String?, at host: LoopSessions,
        reply: @escaping @Sendable (Result<Void, SessionFailure>) -> Void
    ) {
        delete(id, login: login, signedOut: false, reply: reply)
    }

    /// Deletes session `id` for a request carrying `login` (its runner checks it), with `end` reason
    /// `signed-out` when `signedOut`, else `deleted`.
    func delete(
        _ id: String, login: String?, signedOut: Bool, reply: @escaping @Sendable (Result<Void, SessionFailure>) -> Void
    ) {
        guard let owner = owner(of: id) else { return reply(.failure(.notFound)) }
        owner.loop.runOrExecute {
            // Before any work, as for creations and streams: a burst of deletes (thousands at once on a node)
            // put the connection past its bound, and the commits of their `end` events were refused.
            guard self.admits(key: self.keys.session(id), at: owner.loop.index) else { return reply(.failure(.busy)) }
            self.withOwned(
                id, owner: owner, refuse: { reply(.failure($0)) },
                onHeld: { holder, ms in
                    let delete = ForwardedInput(
                        isDelete: true, sessionID: id, viewModel: "", input: "", value: .null, idempotencyKey: nil,
                        login: login, signedOut: signedOut)
                    self.forward(delete, to: holder, owner: owner, remainingMilliseconds: ms) { reply($0.deleteResult) }
                }
            ) { owned in
                guard owned.session.handle.admits(login) else { return reply(.failure(.notFound)) }
                self.deleteOwned(owned, reason: signedOut ? "signed-out" : "deleted", reply: reply)
            }
        }
    }

    /// Deletes a session run here: first an `end` event (`deleted`) is committed, so streams on every
    /// node end as in single-process mode, then the fenced delete (owner loop).
    func deleteOwned(
        _ owned: OwnedSession, reason: String = "deleted", reply: @escaping (Result<Void, SessionFailure>) -> Void
    ) {
        let s = owned.session
        let id = s.id
        let owner = s.owner
        owned.pending.append(
            ClusterEvent.encode(name: "end", data: JSONValue.object(["reason": .string(reason)]).bytes, isSignal: true))
        commit(owned, isInput: false, idempotencyKey: nil) { result in
            if case .failure(let error) = result { return reply(.failure(SessionFailure(error))) }
            owned.keeper?.stop()
            self.stores[owner.loop.index].delete(owned.lease) { result in
                if owner.sessions[id] === s { owner.remove(id, reason: reason) }
                switch result {
                case .success: reply(.success(()))
                case .failure(let error):
                    self.failed(error)
                    reply(.failure(SessionFailure(error)))
                }
            }
        }
    }

    // MARK: state

    func state(
        of id: String, login: String?, at host: LoopSessions,
        reply: @escaping @Sendable (Result<[UInt8], SessionFailure>) -> Void
    ) {
        guard owner(of: id) != nil else { return reply(.failure(.notFound)) }
        let index = host.loop.index
        stores[index].load(sessionID: id) { result in
            switch result {
            case .success(let snapshot):
                switch self.renderSnapshot(snapshot, loop: index, login: login) {
                case .none: reply(.failure(.unreadableState))
                case .some(nil): reply(.failure(.notFound))  // a session of another login
                case .some(let body?): reply(.success(body))
                }
            case .failure(let error):
                self.failed(error)
                reply(.failure(SessionFailure(error)))
            }
        }
    }

    /// `GET /state`'s body from a stored snapshot, with this loop's copy of the app-wide view models (loop
    /// `index`).
    func renderSnapshot(_ snapshot: SessionSnapshot, loop index: Int) -> [UInt8]? {
        renderSnapshot(snapshot, loop: index, login: nil, checked: false) ?? nil
    }

    /// The same for a request carrying `login`: `.some(nil)` when the session belongs to another login.
    func renderSnapshot(_ snapshot: SessionSnapshot, loop index: Int, login: String?, checked: Bool = true)
        -> [UInt8]??
    {
        guard case .object(let stored)? = try? JSONValue.parse(snapshot.state),
            case .object(var outputs)? = stored["outputs"]
        else { return nil }
        if checked, let owner = SessionOwner.person(in: stored["person"]), owner.loginKey != login {
            return .some(nil)
        }
        outputs.merge(loopSessions[index].appWide)
        return .some(JSONValue.object(["seq": .int(Int(snapshot.seq)), "viewModels": .object(outputs)]).bytes)
    }

    // MARK: logins

    /// Adds session `id` to the login's set of sessions (loop `index`), then calls `done` (also when Redis
    /// refused: logged; the session then outlives a sign-out until it expires).
    func listSession(_ id: String, ofLogin key: String, at index: Int, done: @escaping () -> Void) {
        let set = RedisArg(keys.loginSessions(key))
        let ttl = RedisArg(Int(env.configuration.sessionIdleTimeout * 2000))
        // Both on the one connection, in order: one round trip.
        clients[index].send(["SADD", set, RedisArg(id)], key: set) { r in
            if case .failure(let e) = r {
                self.logger.warning("login's session not listed", metadata: ["error": "\(e)"])
            }
        }
        clients[index].send(["PEXPIRE", set, ttl], key: set) { _ in done() }
    }

    /// Ends every session of login `key` in the cluster: each listed one is deleted with `end` reason
    /// `signed-out` (by its runner, wherever it runs), and the list goes. Any thread.
    func endSessions(ofLogin key: String) {
        let host = loopSessions[0]
        host.loop.execute {
            let set = RedisArg(self.keys.loginSessions(key))
            self.clients[0].send(["SMEMBERS", set], key: set) { r in
                guard case .success(let value) = r, let members = value.array else {
                    return self.logger.warning("a login's sessions could not be listed; they end when they expire")
                }
                self.clients[0].send(["DEL", set], key: set) { _ in }
                for id in members.compactMap(\.string) {
                    self.delete(id, login: key, signedOut: true) { _ in }
                }
            }
        }
    }
}

extension SessionFailure {
    /// A store failure in the session layer's terms: gone → `notFound`, fenced → `moved`, unavailable →
    /// `storeUnavailable`, too large → `tooLarge`, not confirmed by the replicas → `notReplicated`, refused
    /// for want of replicas → `shortOfReplicas`.
    init(_ error: StoreError) {
        switch error {
        case .gone: self = .notFound
        case .fenced: self = .moved
        case .unavailable: self = .storeUnavailable
        case .tooLarge(let n): self = .tooLarge(n)
        case .notReplicated: self = .notReplicated
        case .shortOfReplicas: self = .shortOfReplicas
        }
    }
}

/// An event as stored and published: a kind byte (`s` signal, `o` outputs), the view model's name,
/// a newline, its `data:` JSON. Any node frames it with the id the commit gave it.
enum ClusterEvent {
    static func encode(name: String, data: [UInt8], isSignal: Bool) -> [UInt8] {
        var out: [UInt8] = [isSignal ? UInt8(ascii: "s") : UInt8(ascii: "o")]
        out += Array(name.utf8)
        out.append(UInt8(ascii: "\n"))
        out += data
        return out
    }

    /// The SSE frame of a stored event, and whether it is a signal or the session's end; nil if malformed.
    /// `end` (the session was deleted) is framed without an id, as in single-process mode.
    static func frame(_ e: StoredEvent) -> (frame: [UInt8], isSignal: Bool, isEnd: Bool)? {
        let p = e.payload
        guard p.count > 1, let nl = p.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        let name = String(decoding: p[1..<nl], as: UTF8.self)
        let isEnd = name == "end"
        let frame = SSEFrame.event(id: isEnd ? nil : Int(e.id), name: name, data: Array(p[(nl + 1)...]))
        return (frame, p[0] == UInt8(ascii: "s"), isEnd)
    }
}
