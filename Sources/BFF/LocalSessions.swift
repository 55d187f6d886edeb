import EventHTTP
import ViewModels

/// The single-process session backend (the default): every session lives in this process, on the loop
/// its id names (`SessionID`), and every request for it runs there, in arrival order. Reads of a
/// snapshot the owner has published need no hop (`LocalSnapshots`).
///
/// Threading: immutable; each method runs on the request's loop and hops to the session's owner.
final class LocalSessions: SessionBackend {
    let env: SessionEnvironment
    let loops: [LoopSessions]
    /// Where `GET /state` reads a published snapshot without a hop.
    let snapshots: LocalSnapshots

    init(env: SessionEnvironment, loops: [LoopSessions]) {
        self.env = env
        self.loops = loops
        snapshots = LocalSnapshots(loops: loops, hazards: env.hazards)
    }

    func start() {}
    func endSessions(ofLogin key: String) {
        for sl in loops { sl.loop.runOrExecute { sl.endSessions(ofLogin: key) } }
    }
    func prepareShutdown() {}
    var unreadyReason: String? { nil }
    var degradation: [String] { [] }

    /// An app-wide view model's change is an event of every session (numbered in its `seq`, kept in its
    /// history).
    func appWideChanged(_ name: String, _ data: [UInt8], isSignal: Bool, on loop: LoopSessions) {
        loop.emitInEverySession(name, data, isSignal: isSignal)
    }

    /// The loop that owns session `id`, or nil when `id` cannot be one of ours.
    func owner(of id: String) -> LoopSessions? {
        SessionID.loopIndex(of: id, loops: loops.count).map { loops[$0] }
    }

    /// Runs `work` on the owner of session `id` (`notFound` when `id` names no loop of ours), and gives
    /// its answer to `reply` on the owner's loop.
    private func onOwner<T>(
        of id: String, reply: @escaping @Sendable (Result<T, SessionFailure>) -> Void,
        _ work: @escaping @Sendable (LoopSessions) -> Result<T, SessionFailure>
    ) {
        guard let owner = owner(of: id) else { return reply(.failure(.notFound)) }
        owner.loop.runOrExecute { reply(work(owner)) }
    }

    func create(
        at host: LoopSessions, client: ClientAddress, person: SignedInPerson?,
        reply: @escaping @Sendable (Result<String, SessionFailure>) -> Void
    ) {
        let counted: ClientAddress
        switch env.reserveSession(for: client) {
        case .failure(let f): return reply(.failure(f))
        case .success(let key): counted = key
        }
        let id = SessionID.make(loop: host.loop.index)
        host.add(
            Session(
                id: id, owner: host, viewModels: env.makeViewModels(host.executor, client.description, person),
                now: env.now(), client: counted, person: person))
        reply(.success(id))
    }

    /// The snapshot the owner published, read from this loop (no hop); nil when it changed since.
    func currentState(of id: String, login: String?, at host: LoopSessions) -> [UInt8]? {
        snapshots.currentSnapshot(of: id, login: login, reader: host.loop.index, now: env.now())?.json
    }

    func state(
        of id: String, login: String?, at host: LoopSessions,
        reply: @escaping @Sendable (Result<[UInt8], SessionFailure>) -> Void
    ) {
        if let json = currentState(of: id, login: login, at: host) { return reply(.success(json)) }
        // Changed since last encoded (or unknown): the owner encodes and publishes it.
        let env = self.env
        onOwner(of: id, reply: reply) { owner in
            guard let s = owner.sessions[id], s.handle.admits(login) else { return .failure(.notFound) }
            s.lastActivity = env.now()
            return .success(s.encodedSnapshot().json)
        }
    }

    func input(_ input: SessionInput, at host: LoopSessions, reply: @escaping @Sendable (InputResult) -> Void) {
        let env = self.env
        onOwner(of: input.sessionID, reply: reply) { owner in
            guard let s = owner.sessions[input.sessionID], s.handle.admits(input.login) else {
                return .failure(.notFound)
            }
            return .success(
                s.offer(
                    viewModel: input.viewModel, input: input.input, value: input.value,
                    idempotencyKey: input.idempotencyKey, now: env.now()))
        }
    }

    func delete(
        _ id: String, login: String?, at host: LoopSessions,
        reply: @escaping @Sendable (Result<Void, SessionFailure>) -> Void
    ) {
        onOwner(of: id, reply: reply) { owner in
            guard let s = owner.sessions[id], s.handle.admits(login) else { return .failure(.notFound) }
            owner.remove(id, reason: "deleted")
            return .success(())
        }
    }

    func openStream(
        _ stream: any SessionEventSink, sessionID id: String, login: String?, lastEventID: Int?,
        refuse: @escaping (SessionFailure) -> Void
    ) {
        guard let owner = owner(of: id) else { return refuse(.notFound) }
        stream.sessionOwner = owner
        let (env, link) = (self.env, stream.link)
        // `refuse` stays on the host loop: the owner answers with a failure, which hops back.
        let answer = LoopBoundReference(RefusalBox(refuse), loop: stream.host.loop)
        owner.loop.runOrExecute {
            let limit = env.configuration.maxStreamsPerSession
            guard let s = owner.sessions[id], s.handle.admits(login) else {
                return answer.run { $0.refuse(.notFound) }
            }
            guard s.streams.count < limit else {
                return answer.run { $0.refuse(.tooManyStreams(limit: limit, clusterWide: false)) }
            }
            s.streams.append(link)
            s.used = true
            s.lastActivity = env.now()
            var initial: [UInt8] = []
            if let last = lastEventID, let frames = s.history.frames(after: last, currentSeq: s.seq) {
                for f in frames { initial += f.frame }
            } else {
                initial += s.snapshotFrame
            }
            let frames = initial
            link.run { $0.start(initial: frames) }
        }
    }
}

/// A `refuse` callback kept on its stream's host loop while the owner decides (host loop only).
final class RefusalBox {
    let refuse: (SessionFailure) -> Void
    init(_ refuse: @escaping (SessionFailure) -> Void) { self.refuse = refuse }
}
