import ClusterStore
import EventHTTP
import JSON
import ViewModels

/// Cluster mode's routes and ownership (see docs/CLUSTER.md, "The session layer in cluster mode").
///
/// - A session runs on the loop its id names (modulo this node's loops) of the node holding its lease.
/// - Every change is a fenced commit; an input's `202` is sent only once its commit succeeded.
/// - An input at a node that does not hold the lease: if the lease is free (expired, released), this
///   node takes the session over (restores its view models from the stored state); while another node
///   holds a live lease it is forwarded to that node through Redis (`ClusterForwarding.swift`).
/// - `GET /state` answers from the store's committed snapshot; streams on every node are fed by the
///   session's Redis channel with `StreamCatchUp`.
extension Application {
    // MARK: create

    func clusterCreate(_ cluster: ClusterNode, _ req: HTTPRequest, _ res: HTTPResponder) {
        guard reserveSession() else {
            return res.send(
                .problem(
                    status: 503,
                    detail: "the server holds its maximum of \(configuration.maxSessions) sessions; retry later",
                    headers: [("Retry-After", "30")]))
        }
        let index = req.loop.index
        let home = sessionLoops[index]
        let id = SessionID.make(loop: index)
        let loop = home.loop
        let session = Session(
            id: id, home: home, viewModels: makeViewModels({ work in loop.execute(work) }), now: now())
        cluster.stores[index].create(sessionID: id, holder: cluster.holders[index], state: clusterState(of: session)) {
            [unowned self] result in
            switch result {
            case .success(let lease):
                self.adopt(session, lease: lease, committedInputSeq: 0, cluster: cluster, home: home)
                let location = "/api/sessions/\(id)"
                res.send(
                    .json(
                        201,
                        [
                            "id": .string(id), "events": .string(location + "/events"),
                            "state": .string(location + "/state"),
                            "expiresInSeconds": .int(Int(self.configuration.sessionIdleTimeout)),
                        ], headers: [("Location", location), ("Cache-Control", "no-store")]))
            case .failure(let error):
                cluster.failed(error)
                session.end(reason: "moved")
                self.sessionEnded(reason: "moved")
                res.send(Application.response(to: error, cluster: cluster, sessionID: id))
            }
        }
    }

    // MARK: ownership

    /// Makes `session` one this loop runs under `lease`: its events go to commits, its lease is renewed.
    @discardableResult
    func adopt(_ session: Session, lease: Lease, committedInputSeq: Int, cluster: ClusterNode, home: SessionLoop)
        -> OwnedSession
    {
        let owned = OwnedSession(session: session, lease: lease, committedInputSeq: committedInputSeq)
        let state = cluster.perLoop[home.loop.index]
        state.value.heldElsewhere[session.id] = nil
        let store = cluster.stores[home.loop.index]
        // The session keeps `owned` (and `owned` the session) until it ends: `Session.end` drops the sink.
        session.eventSink = { [unowned self] name, data, isSignal in
            owned.pending.append(ClusterEvent.encode(name: name, data: data, isSignal: isSignal))
            guard !owned.flushScheduled else { return }
            owned.flushScheduled = true
            home.loop.runSoon { self.flush(owned, cluster: cluster) }
        }
        let subscriber = cluster.subscribers[home.loop.index]
        let inputChannel = cluster.inputChannel(session.id)
        let feed = cluster.feeds[home.loop.index]  // captured instead of `home` (which holds the session)
        session.onEnd = { [unowned owned] in
            owned.failWaiters()
            guard state.value.owned[session.id] === owned else { return }
            state.value.owned[session.id] = nil
            subscriber.unsubscribe(channel: inputChannel)
            // Streams here fed by this loop's commits now follow whoever runs the session next.
            if let fed = state.value.fed[session.id], fed.local {
                fed.follow(feed, sessionID: session.id)
            }
            let keeper = owned.keeper
            owned.keeper = nil  // the keeper's onLost refers back to `owned`
            keeper?.handOver { r in if case .success(true) = r { cluster.metrics.handOvers.increment() } }
        }
        let renewals = state.value.renewals
        let interval = cluster.settings.leaseTTL / 3
        // Renewals run in the loop's ~0.1 s slices (at most 0.1 s late: TTL/3 leaves two thirds of the
        // TTL): those of one slice are one round trip.
        let keeper = LeaseKeeper(
            lease: lease, store: store, ttlSeconds: cluster.settings.leaseTTL, interval: interval,
            schedule: { seconds, work in renewals.schedule(after: seconds, work) },
            onLost: { [unowned self, unowned owned] loss in
                self.logger.warning("lease lost", metadata: ["session": "\(session.id)", "loss": "\(loss)"])
                owned.keeper = nil
                if home.sessions[session.id] === session { home.remove(session.id, reason: "moved") }
            })
        owned.keeper = keeper
        state.value.owned[session.id] = owned
        // Inputs that reach other nodes come here through Redis while this loop runs the session.
        subscriber.subscribe(channel: inputChannel) { [unowned self] message in
            self.receiveForwarded(message.payload, cluster: cluster, home: home)
        }
        home.add(session)
        keeper.start(firstDelay: Double.random(in: 0.5...1) * interval)  // spread, see start
        return owned
    }

    /// Commits the events effects and status changes emitted outside an input (owner loop).
    func flush(_ owned: OwnedSession, cluster: ClusterNode) {
        owned.flushScheduled = false
        guard !owned.pending.isEmpty, !owned.session.isEnded else { return }
        commit(owned, cluster: cluster, isInput: false, idempotencyKey: nil) { _ in }
    }

    /// One fenced commit of `owned`'s pending events and current state; on failure the session leaves
    /// this node (its memory may be ahead of the store) and is restored from the store next time.
    func commit(
        _ owned: OwnedSession, cluster: ClusterNode, isInput: Bool, idempotencyKey: String?,
        completion: @escaping (Result<CommitResult, StoreError>) -> Void
    ) {
        let s = owned.session
        let events = owned.pending
        owned.pending = []
        let c = SessionCommit(
            lease: owned.lease, events: events, state: clusterState(of: s, memos: &owned.storedForms), isInput: isInput,
            idempotencyKey: idempotencyKey)
        cluster.stores[s.home.loop.index].commit(c) { result in
            switch result {
            case .success(let r):
                if let last = r.eventIDs.last, !s.isEnded { s.adoptCommitted(seq: Int(last)) }
                self.deliverLocally(s.id, events, ids: r.eventIDs, cluster: cluster, loop: s.home.loop.index)
            case .failure(let error):
                cluster.failed(error)
                if error == .fenced { cluster.metrics.fenced.increment() }
                self.logger.warning("commit failed", metadata: ["session": "\(s.id)", "error": "\(error)"])
                if error == .fenced { owned.keeper?.stop() }
                // Only this incarnation: a later acquisition may have put a fresh one in its place.
                if s.home.sessions[s.id] === s { s.home.remove(s.id, reason: "moved") }
            }
            completion(result)
        }
    }

    /// Runs `body` with the session this loop holds the lease of, acquiring it (a takeover when another
    /// holder had it) if the lease is free; otherwise answers on `res`.
    func withOwned(
        _ id: String, cluster: ClusterNode, home: SessionLoop, reply: @escaping (HTTPResponse) -> Void,
        onHeld: ((_ remainingMilliseconds: Int) -> Void)? = nil, _ body: @escaping (OwnedSession) -> Void
    ) {
        let state = cluster.perLoop[home.loop.index]
        if let owned = state.value.owned[id] { return body(owned) }
        cluster.stores[home.loop.index].acquire(sessionID: id, holder: cluster.holders[home.loop.index]) {
            [unowned self] result in
            if let owned = state.value.owned[id] { return body(owned) }  // acquired meanwhile here
            switch result {
            case .success(.acquired(let lease, let snapshot)):
                guard self.reserveSession() else {
                    return reply(
                        .problem(status: 503, detail: "too many sessions", headers: [("Retry-After", "30")]))
                }
                let loop = home.loop
                let session = Session(
                    id: id, home: home, viewModels: self.makeViewModels({ work in loop.execute(work) }), now: self.now()
                )
                do {
                    if !snapshot.state.isEmpty { try session.restore(from: snapshot.state) }
                } catch {
                    self.logger.error("stored state refused", metadata: ["session": "\(id)", "error": "\(error)"])
                    session.end(reason: "moved")
                    self.sessionEnded(reason: "moved")
                    cluster.stores[home.loop.index].release(lease) { _ in }
                    return reply(
                        .problem(status: 500, detail: "the session's stored state is unreadable"))
                }
                session.adoptCommitted(seq: Int(snapshot.seq), inputSeq: Int(snapshot.inputSeq))
                cluster.metrics.takeovers.increment()
                body(
                    self.adopt(
                        session, lease: lease, committedInputSeq: Int(snapshot.inputSeq), cluster: cluster, home: home))
            case .success(.heldBy(_, let ms)):
                if let onHeld { return onHeld(ms) }
                cluster.metrics.crossNodeInputs.increment()
                let seconds = max(1, (ms + 999) / 1000)
                reply(
                    .problem(
                        status: 503,
                        detail: "session '\(id)' is run by another node; this node takes it over when that node's "
                            + "lease ends (in \(seconds) s at most) — retry then, or send inputs to that node",
                        headers: [("Retry-After", String(seconds))]))
            case .failure(let error):
                cluster.failed(error)
                reply(Application.response(to: error, cluster: cluster, sessionID: id))
            }
        }
    }

    // MARK: routes

    func clusterInput(
        _ cluster: ClusterNode, id: String, viewModel vmName: String, input: String, value: JSONValue, key: String?,
        _ req: HTTPRequest, _ res: HTTPResponder
    ) {
        guard let home = home(of: id) else { return res.send(Application.noSession(id)) }
        let reply: @Sendable (HTTPResponse) -> Void = { res.sendFromAnyLoop($0) }
        home.loop.runOrExecute { [unowned self] in
            let forwarded = ForwardedInput(
                sessionID: id, viewModel: vmName, input: input, value: value, idempotencyKey: key)
            // `acquire`, then apply here or forward; when the forward reaches nobody (the owner has just
            // released the session, or is not subscribed yet), `acquire` once more.
            func acquireFirst(retries: Int) {
                self.withOwned(
                    id, cluster: cluster, home: home, reply: reply,
                    onHeld: { ms in
                        self.rememberHolder(id, remainingMilliseconds: ms, cluster: cluster, home: home)
                        self.forward(
                            forwarded, cluster: cluster, home: home, remainingMilliseconds: ms, reply: reply,
                            onNobody: retries > 0 ? { acquireFirst(retries: retries - 1) } : nil)
                    }
                ) { owned in
                    self.applyInput(
                        owned, cluster: cluster, viewModel: vmName, input: input, value: value, key: key, reply: reply)
                }
            }
            self.forwardToKnownHolder(forwarded, cluster: cluster, home: home, reply: reply) {
                acquireFirst(retries: 1)
            }
        }
    }

    /// Applies one input to a session run here and answers once it is committed (owner loop).
    func applyInput(
        _ owned: OwnedSession, cluster: ClusterNode, viewModel vmName: String, input: String, value: JSONValue,
        key: String?, reply: @escaping (HTTPResponse) -> Void
    ) {
        let s = owned.session
        let id = s.id
        let apply = {
            let outcome = s.offer(viewModel: vmName, input: input, value: value, idempotencyKey: key, now: self.now())
            switch outcome {
            case .accepted(let n):
                self.commit(owned, cluster: cluster, isInput: true, idempotencyKey: key) { result in
                    switch result {
                    case .success(let r):
                        let seq = r.inputSeq.map { Int($0) } ?? n
                        if seq != n {
                            self.logger.error(
                                "inputSeq differs from the store's", metadata: ["local": "\(n)", "store": "\(seq)"])
                        }
                        owned.acknowledged(seq)
                        reply(.json(202, ["inputSeq": .int(seq)]))
                    case .failure(let error):
                        reply(Application.response(to: error, cluster: cluster, sessionID: id))
                    }
                }
            case .duplicate(let n) where n > owned.committedInputSeq:
                // The first attempt's commit is still in flight: answer when it lands.
                owned.waiters.append(
                    (
                        n,
                        { ok in
                            reply(
                                ok
                                    ? .json(202, ["inputSeq": .int(n)])
                                    : Application.response(to: .unavailable("moved"), cluster: cluster, sessionID: id))
                        }
                    ))
            default:
                reply(Application.response(to: outcome, sessionID: id))
            }
        }
        guard let key else { return apply() }
        // A key a previous owner committed is in the store, not in this node's memory.
        cluster.stores[s.home.loop.index].inputSeq(sessionID: id, idempotencyKey: key) { result in
            switch result {
            case .success(let seen?): reply(.json(202, ["inputSeq": .int(Int(seen))]))
            case .success(nil): apply()
            case .failure(let error):
                cluster.failed(error)
                reply(Application.response(to: error, cluster: cluster, sessionID: id))
            }
        }
    }

    func clusterDelete(_ cluster: ClusterNode, id: String, _ req: HTTPRequest, _ res: HTTPResponder) {
        guard let home = home(of: id) else { return res.send(Application.noSession(id)) }
        let reply: @Sendable (HTTPResponse) -> Void = { res.sendFromAnyLoop($0) }
        home.loop.runOrExecute { [unowned self] in
            self.withOwned(
                id, cluster: cluster, home: home, reply: reply,
                onHeld: { ms in
                    let delete = ForwardedInput(
                        isDelete: true, sessionID: id, viewModel: "", input: "", value: .null, idempotencyKey: nil)
                    self.forward(delete, cluster: cluster, home: home, remainingMilliseconds: ms, reply: reply)
                }
            ) { owned in self.deleteOwned(owned, cluster: cluster, reply: reply) }
        }
    }

    /// Deletes a session run here: first an `end` event (`deleted`) is committed, so streams on every
    /// node end as in single-process mode, then the fenced delete (owner loop).
    func deleteOwned(_ owned: OwnedSession, cluster: ClusterNode, reply: @escaping (HTTPResponse) -> Void) {
        let s = owned.session
        let id = s.id
        let home = s.home
        owned.pending.append(
            ClusterEvent.encode(name: "end", data: Array(#"{"reason":"deleted"}"#.utf8), isSignal: true))
        commit(owned, cluster: cluster, isInput: false, idempotencyKey: nil) { result in
            if case .failure(let error) = result {
                return reply(Application.response(to: error, cluster: cluster, sessionID: id))
            }
            owned.keeper?.stop()
            cluster.stores[home.loop.index].delete(owned.lease) { result in
                if home.sessions[id] === s { home.remove(id, reason: "deleted") }
                switch result {
                case .success: reply(HTTPResponse(status: 204))
                case .failure(let error):
                    cluster.failed(error)
                    reply(Application.response(to: error, cluster: cluster, sessionID: id))
                }
            }
        }
    }

    func clusterState(_ cluster: ClusterNode, id: String, _ req: HTTPRequest, _ res: HTTPResponder) {
        guard home(of: id) != nil else { return res.send(Application.noSession(id)) }
        let index = req.loop.index
        cluster.stores[index].load(sessionID: id) { [unowned self] result in
            switch result {
            case .success(let snapshot):
                guard let body = self.renderSnapshot(snapshot, loop: index) else {
                    return res.send(.problem(status: 500, detail: "the session's stored state is unreadable"))
                }
                res.send(HTTPResponse(status: 200, headers: Application.stateHeaders, body: body))
            case .failure(let error):
                cluster.failed(error)
                res.send(Application.response(to: error, cluster: cluster, sessionID: id))
            }
        }
    }

    // MARK: stored form

    /// The bytes stored as a session's state (`SessionSnapshot.state`, `SessionCommit.state`): each of the
    /// session's own view models' `durableState` (the shared `status` is app-wide and not included; `seq`
    /// and `inputSeq` are stored beside the state) plus `outputs`, the view models' snapshot outputs, so
    /// any node answers `GET /state` without running them:
    /// `{"version":1,"viewModels":{name: durableState, …},"outputs":{name: snapshot, …}}`. Each view model's parts come from its memo in `memos`
    /// (made on first use, one per view model, kept by the owner between commits), so a commit encodes
    /// only the view models that changed since the last one (owner loop).
    func clusterState(of s: Session, memos: inout [StoredFormMemo]) -> [UInt8] {
        let vms = s.viewModels
        if memos.count != vms.count { memos = vms.map { _ in StoredFormMemo() } }
        var size = 48
        for (vm, memo) in zip(vms, memos) {
            memo.refresh(vm)
            size += 2 * vm.name.utf8.count + memo.durable.count + memo.snapshot.count + 8
        }
        var out: [UInt8] = []
        out.reserveCapacity(size)
        out.append(contentsOf: #"{"version":"#.utf8)
        JSONValue.writeInt(Session.durableVersion, into: &out)
        /// `{name: part, …}` of every view model, `part` already JSON text.
        func members(_ part: (StoredFormMemo) -> [UInt8]) {
            out.append(UInt8(ascii: "{"))
            for (i, (vm, memo)) in zip(vms, memos).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(vm.name, into: &out)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: part(memo))
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #","viewModels":"#.utf8)
        members { $0.durable }
        out.append(contentsOf: #","outputs":"#.utf8)
        members { $0.snapshot }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `clusterState(of:memos:)` without memos kept (a session's first commit).
    func clusterState(of s: Session) -> [UInt8] {
        var memos: [StoredFormMemo] = []
        return clusterState(of: s, memos: &memos)
    }

    /// `GET /state`'s body from a stored snapshot, with this loop's copy of the shared `status` (loop `index`).
    func renderSnapshot(_ snapshot: SessionSnapshot, loop index: Int) -> [UInt8]? {
        guard case .object(let stored)? = try? JSONValue.parse(snapshot.state),
            case .object(var outputs)? = stored["outputs"]
        else { return nil }
        outputs["status"] = .object(sessionLoops[index].statusSnapshot)
        return JSONValue.object(["seq": .int(Int(snapshot.seq)), "viewModels": .object(outputs)]).bytes
    }

    /// A store failure as HTTP: gone → 404, fenced (moved) or unavailable → 503 + Retry-After.
    static func response(to error: StoreError, cluster: ClusterNode, sessionID id: String) -> HTTPResponse {
        switch error {
        case .gone: return noSession(id)
        case .fenced:
            return .problem(
                status: 503, detail: "session '\(id)' moved to another node; retry", headers: [("Retry-After", "1")])
        case .unavailable:
            return .problem(
                status: 503, detail: "the cluster's Redis is unavailable; retry", headers: [("Retry-After", "1")])
        case .tooLarge(let n):
            return .problem(status: 413, detail: "the session's state or event is too large (\(n) bytes)")
        }
    }
}

extension HTTPResponder {
    /// Sends from whichever loop the caller is on (hops to the responder's loop).
    func sendFromAnyLoop(_ response: HTTPResponse) {
        loop.runOrExecute { self.send(response) }
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
