import ClusterStore
import EventHTTP
import RedisClient

/// One event stream in cluster mode, on its connection's loop, fed by the session's Redis channel:
/// subscribe, then replay from `Last-Event-ID` (or load a snapshot), then the live events, each id
/// once and in order (`StreamCatchUp`). The same on the owner node and on any other.
///
/// It is its sink's `ExternalFeed` (a fresh snapshot when the sink fell behind; told when the sink is over),
/// held by the loop's `StreamedSession` of its session until then.
///
/// Threading: host loop only.
final class ClusterStream: ExternalFeed {
    let stream: any SessionEventSink
    /// The session's id, as its sink keeps it (not a second copy: a malloc size class per stream).
    var sessionID: String { stream.sessionID }
    /// This stream's number on its loop: its name in the session's cluster-wide set of open streams
    /// (`SessionStore.admitStream`) is `member`, made when needed, not kept (a string on every stream).
    let memberNumber: Int
    private var catchUp: StreamCatchUp
    /// True until the first snapshot was written, for a client without `Last-Event-ID`.
    private var needsSnapshot: Bool
    /// True for a client that came back with `Last-Event-ID` (it may get a replay, not a snapshot).
    private let resumed: Bool
    private var started = false
    /// A resumed stream whose replay was empty owes its client the app-wide view models' outputs (not in the history:
    /// `ClusterNode.appWideChanged`): it follows the stream's first event, never comes before it.
    private var appWideOwed = false
    // `ended` beside the other flags and `behindAt` without an optional's extra byte: one allocation size
    // class less per cluster stream.
    private var ended = false
    /// Answers the request when the stream cannot start (until it starts).
    private var refuse: ((SessionFailure) -> Void)?
    private let node: ClusterNode
    private var retryTimer: LoopTimer?
    private var startTimer: LoopTimer?
    /// The last written id when a periodic check last found the session's `seq` above it (`checked`);
    /// `.max` when it did not (no written id is `.max`: a session's `seq` would have to be above it).
    private var behindAt = UInt64.max

    init(
        memberNumber: Int, lastEventID: Int?, stream: any SessionEventSink,
        refuse: @escaping (SessionFailure) -> Void, node: ClusterNode
    ) {
        self.memberNumber = memberNumber
        self.stream = stream
        self.refuse = refuse
        self.node = node
        catchUp = StreamCatchUp(lastEventID: UInt64(max(0, lastEventID ?? 0)))
        needsSnapshot = lastEventID == nil
        resumed = lastEventID != nil
        super.init()
    }

    private var index: Int { stream.host.loop.index }

    /// This stream's name in the session's cluster-wide set of open streams.
    var member: String { node.streamMember(loop: index, memberNumber) }

    /// Answers `503` if the stream has not started `seconds` from now (host loop): a subscription Redis
    /// never confirms (Redis gone after the stream was admitted, a channel the ACL refuses) would
    /// otherwise leave the client waiting without an answer. The timer holds the stream until it fires or
    /// the stream starts (then it is cancelled): no weak reference, whose side table would stay with
    /// every stream for its whole life.
    func armStartDeadline(after seconds: Double) {
        startTimer = stream.host.loop.schedule(after: seconds) { [self] in
            self.startTimer = nil
            guard !self.started, !self.ended else { return }
            self.fail(.unavailable("the session's event feed did not start in \(seconds) s"))
        }
    }

    /// The subscription is active (first time or after a reconnect): read what was missed.
    func resync() {
        guard !ended else { return }
        catchUp.restart()
        if needsSnapshot { return writeSnapshot() }
        node.stores[index].replay(
            sessionID: sessionID, after: catchUp.lastWritten, limit: node.env.configuration.historyEvents
        ) { [self] result in
            switch result {
            case .success(let replay):
                switch catchUp.replayed(replay) {
                case .write(let events): write(events)
                case .snapshot: writeSnapshot()
                }
            case .failure(let error): fail(error)
            }
        }
    }

    /// A periodic check read the session's `seq`: a stream that stayed behind it since the previous check
    /// missed a live event and catches up from the history (`resync`: the same order as after a
    /// resubscription, so nothing is written twice).
    func checked(seq: UInt64) {
        guard !ended, started, !catchUp.isCatchingUp, !needsSnapshot else { return }
        let last = catchUp.lastWritten
        guard seq > last else {
            behindAt = .max
            return
        }
        if behindAt == last {
            behindAt = .max
            resync()
        } else {
            behindAt = last
        }
    }

    /// A live event from the feed.
    func live(_ event: StoredEvent) {
        guard !ended else { return }
        write(catchUp.live(event))
    }

    /// The stored snapshot as a frame, for a stream that fell behind.
    override func snapshotFrame(_ done: @escaping ([UInt8]) -> Void) {
        let index = self.index
        node.stores[index].load(sessionID: sessionID) { [node] result in
            guard case .success(let snapshot) = result, let body = node.renderSnapshot(snapshot, loop: index) else {
                return
            }
            done(SSEFrame.event(id: Int(snapshot.seq), name: "snapshot", data: body))
        }
    }

    /// The sink is over (host loop, once): this stream leaves its session's streams on this loop (the last
    /// one unsubscribes the loop from the session's channel) and the session's cluster-wide set of open
    /// streams (best effort: if this is lost, Redis away or the node killed, the member's deadline ends it).
    override func sinkClosed() {
        let (index, id) = (self.index, sessionID)  // each read goes through the sink: read once
        let state = node.perLoop[index]
        // A session's `StreamedSession` stays in `fed` while it has a stream: it is the one this stream joined.
        if let fed = state.value.fed[id] {
            fed.streams.removeAll { $0 === self }
            if fed.streams.isEmpty {
                let subscribed = !fed.local
                state.value.removeFed(fed, id: id)  // the last reference to `fed`: read nothing of it after this
                if subscribed { node.feeds[index].unsubscribe(sessionID: id) }
            }
        }
        node.stores[index].releaseStream(sessionID: id, member: member) { _ in }
    }

    private func writeSnapshot() {
        let index = self.index
        node.stores[index].load(sessionID: sessionID) { [self] result in
            switch result {
            case .success(let snapshot):
                guard let body = node.renderSnapshot(snapshot, loop: index) else {
                    return fail(.unavailable("unreadable state"))
                }
                needsSnapshot = false
                let frame = SSEFrame.event(id: Int(snapshot.seq), name: "snapshot", data: body)
                let after = catchUp.snapshotWritten(seq: snapshot.seq)
                emit([frame], signals: [])
                write(after)
            case .failure(let error): fail(error)
            }
        }
    }

    private func write(_ events: [StoredEvent]) {
        var frames: [[UInt8]] = []
        var signals: Set<Int> = []
        for e in events {
            guard let f = ClusterEvent.frame(e) else { continue }
            if f.isEnd {
                emit(frames, signals: signals)
                return end(with: f.frame)
            }
            if f.isSignal { signals.insert(frames.count) }
            frames.append(f.frame)
        }
        emit(frames, signals: signals)
    }

    /// The session ended (deleted): `event: end`, then the stream closes.
    private func end(with frame: [UInt8]) {
        guard !ended else { return }
        ended = true
        if !started { start(with: []) }
        stream.finish(with: frame)
    }

    private func emit(_ frames: [[UInt8]], signals: Set<Int>) {
        guard started else { return start(with: frames) }
        for (i, f) in frames.enumerated() { stream.deliverFromSession(f, isSignal: signals.contains(i)) }
        if appWideOwed, !frames.isEmpty {
            appWideOwed = false
            stream.deliverFromSession(stream.host.appWideFrames, isSignal: false)
        }
    }

    /// Answers the request: the stream's head, `retry:` and `frames` (once; no start deadline after it).
    private func start(with frames: [[UInt8]]) {
        guard !started else { return }
        started = true
        refuse = nil
        startTimer?.cancel()
        startTimer = nil
        var initial: [UInt8] = []
        for f in frames { initial += f }
        // Resumed from a replay: the app-wide view models are not in the history (`ClusterNode.appWideChanged`), so it
        // follows the replay; after an empty replay it waits for the stream's first event (the first
        // event of a stream is its snapshot or its replay, never an app-wide one).
        if resumed {
            if frames.isEmpty { appWideOwed = true } else { initial += stream.host.appWideFrames }
        }
        stream.start(initial: initial)
    }

    private func fail(_ error: StoreError) {
        node.failed(error)
        if !started, let refuse {
            ended = true
            self.refuse = nil
            refuse(SessionFailure(error))
            stream.externalFeed?.sinkClosed()
            stream.externalFeed = nil
            return
        }
        if case .gone = error { return end(with: SSEFrame.event(id: nil, name: "end", json: ["reason": "deleted"])) }
        // Still catching up (live events held back): the subscriber may be back before this loop's
        // command connection (they reconnect on their own), so the read is tried again shortly.
        guard retryTimer == nil else { return }
        retryTimer = stream.host.loop.schedule(after: Self.retryDelay) { [weak self] in
            self?.retryTimer = nil
            self?.resync()
        }
    }

    /// Seconds before a failed catch-up read (Redis not reachable from this loop) is tried again.
    static let retryDelay = 0.2
}

extension ClusterNode {
    /// `GET /api/sessions/{id}/events` in cluster mode (the request's loop, which hosts `stream`).
    func openStream(
        _ stream: any SessionEventSink, sessionID id: String, login: String?, lastEventID: Int?,
        refuse: @escaping (SessionFailure) -> Void
    ) {
        guard let owner = owner(of: id) else { return refuse(.notFound) }
        let index = stream.host.loop.index
        // A stream starts only once its subscription is confirmed: while the session's master is away
        // (down, being replaced) it would wait without an answer, so it is refused like every other
        // request that needs Redis. Sessions on other shards are not affected.
        guard clients[index].canServe(key: RedisArg(keys.session(id))) else { return refuse(.storeUnavailable) }
        guard admits(key: keys.session(id), at: index) else { return refuse(.busy) }
        let state = perLoop[index]
        let limit = env.configuration.maxStreamsPerSession
        // This loop's own count is a lower bound of the cluster's: refused without a round trip.
        guard (state.value.fed[id]?.streams.count ?? 0) < limit else {
            return refuse(.tooManyStreams(limit: limit, clusterWide: true))
        }
        // With sign-in, whose the session is is read first (one round trip, once per stream): a session of
        // another login is refused as if it did not exist, before anything of it is sent.
        if env.signInEnabled {
            return stores[index].load(sessionID: id) { result in
                switch result {
                case .success(let snapshot):
                    if let person = Session.person(inStoredForm: snapshot.state), person.loginKey != login {
                        return refuse(.notFound)
                    }
                    self.admitStream(stream, id: id, owner: owner, lastEventID: lastEventID, refuse: refuse)
                case .failure(let error):
                    self.failed(error)
                    refuse(SessionFailure(error))
                }
            }
        }
        admitStream(stream, id: id, owner: owner, lastEventID: lastEventID, refuse: refuse)
    }

    /// `openStream` once the session may be streamed to this request: admitted in the session's
    /// cluster-wide set of open streams, or refused at its limit (request loop).
    private func admitStream(
        _ stream: any SessionEventSink, id: String, owner: LoopSessions, lastEventID: Int?,
        refuse: @escaping (SessionFailure) -> Void
    ) {
        let index = stream.host.loop.index
        let state = perLoop[index]
        let limit = env.configuration.maxStreamsPerSession
        // The limit is cluster-wide: the session's set of open streams in the store admits this one (one
        // round trip), or refuses it when `limit` streams on any nodes count.
        let number = state.value.nextStream
        state.value.nextStream += 1
        stores[index].admitStream(
            sessionID: id, member: streamMember(loop: index, number), limit: limit,
            ttlMilliseconds: streamDeadlineMilliseconds
        ) { result in
            switch result {
            case .success(true):
                self.startStream(
                    stream, id: id, memberNumber: number, owner: owner, lastEventID: lastEventID, refuse: refuse)
            case .success(false):
                refuse(.tooManyStreams(limit: limit, clusterWide: true))
            case .failure(let error):
                self.failed(error)
                refuse(SessionFailure(error))
            }
        }
    }

    /// Starts an admitted stream: fed by the session's subscription on this loop (made by its first
    /// stream), released from the session's set of open streams when it closes (request loop).
    private func startStream(
        _ stream: any SessionEventSink, id: String, memberNumber: Int, owner: LoopSessions, lastEventID: Int?,
        refuse: @escaping (SessionFailure) -> Void
    ) {
        let index = stream.host.loop.index
        let state = perLoop[index]
        let fed = state.value.fed[id] ?? StreamedSession(slot: state.value.takeSlot(of: streamedCheckSlices))
        let cs = ClusterStream(
            memberNumber: memberNumber, lastEventID: lastEventID, stream: stream, refuse: refuse, node: self)
        stream.externalFeed = cs
        // Two round trips at most before the first byte (the subscription's confirmation, then the
        // snapshot or the replay), each bounded by the command time-out.
        cs.armStartDeadline(after: 2 * settings.redis.commandTimeout + 1)
        fed.streams.append(cs)
        if state.value.fed[id] == nil {
            state.value.addFed(fed, id: id)
            if index == owner.loop.index, state.value.owned[id] != nil {
                // Run on this very loop: its commits feed the streams (`deliverLocally`), without a round
                // trip through Redis's pub/sub for the node's own events, until the session leaves it.
                fed.followCommits()
            } else {
                fed.follow(feeds[index], sessionID: id)
            }
        } else if fed.subscribed {
            cs.resync()
        }
    }

    /// Hands the events a commit on this loop just stored (`ids` in order) to the streams of session
    /// `id` this loop feeds from its own commits (`StreamedSession.local`); each is written once, in order, as
    /// if it had come from the channel (owner loop).
    func deliverLocally(_ id: String, _ events: [[UInt8]], ids: [UInt64], loop: Int) {
        guard let fed = perLoop[loop].value.fed[id], fed.local, ids.count == events.count else { return }
        for (i, eventID) in ids.enumerated() {
            let event = StoredEvent(id: eventID, payload: events[i])
            for s in fed.streams { s.live(event) }
        }
    }
}
