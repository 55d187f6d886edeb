import ClusterStore
import EventHTTP
import RedisClient

/// One event stream in cluster mode, on its connection's loop, fed by the session's Redis channel:
/// subscribe, then replay from `Last-Event-ID` (or load a snapshot), then the live events, each id
/// once and in order (`StreamCatchUp`). The same on the owner node and on any other.
///
/// Threading: host loop only.
final class ClusterStream: @unchecked Sendable {  // host loop only
    let sessionID: String
    let stream: SessionStream
    /// This stream's name in the session's cluster-wide set of open streams (`SessionStore.admitStream`).
    let member: String
    private var catchUp: StreamCatchUp
    /// True until the first snapshot was written, for a client without `Last-Event-ID`.
    private var needsSnapshot: Bool
    private var started = false
    private var responder: HTTPResponder?
    private let app: Application
    private let cluster: ClusterNode
    private var ended = false
    private var retryTimer: LoopTimer?
    private var startTimer: LoopTimer?

    init(
        sessionID: String, member: String, lastEventID: Int?, stream: SessionStream, responder: HTTPResponder,
        app: Application, cluster: ClusterNode
    ) {
        self.sessionID = sessionID
        self.member = member
        self.stream = stream
        self.responder = responder
        self.app = app
        self.cluster = cluster
        catchUp = StreamCatchUp(lastEventID: UInt64(max(0, lastEventID ?? 0)))
        needsSnapshot = lastEventID == nil
    }

    private var index: Int { stream.host.loop.index }

    /// Answers `503` if the stream has not started `seconds` from now (host loop): a subscription Redis
    /// never confirms (Redis gone after the stream was admitted, a channel the ACL refuses) would
    /// otherwise leave the client waiting without an answer.
    func armStartDeadline(after seconds: Double) {
        startTimer = stream.host.loop.schedule(after: seconds) { [weak self] in
            guard let self else { return }
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
        cluster.stores[index].replay(
            sessionID: sessionID, after: catchUp.lastWritten, limit: app.configuration.historyEvents
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

    /// A live event from the feed.
    func live(_ event: StoredEvent) {
        guard !ended else { return }
        write(catchUp.live(event))
    }

    /// The stored snapshot as a frame, for a stream that fell behind.
    func snapshotFrame(_ done: @escaping ([UInt8]) -> Void) {
        let index = self.index
        cluster.stores[index].load(sessionID: sessionID) { [app] result in
            guard case .success(let snapshot) = result, let body = app.renderSnapshot(snapshot, loop: index) else {
                return
            }
            done(SSEFrame.event(id: Int(snapshot.seq), name: "snapshot", data: body))
        }
    }

    private func writeSnapshot() {
        let index = self.index
        cluster.stores[index].load(sessionID: sessionID) { [self] result in
            switch result {
            case .success(let snapshot):
                guard let body = app.renderSnapshot(snapshot, loop: index) else {
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
    }

    /// Answers the request: the stream's head, `retry:` and `frames` (once; no start deadline after it).
    private func start(with frames: [[UInt8]]) {
        guard !started, let responder else { return }
        started = true
        startTimer?.cancel()
        startTimer = nil
        self.responder = nil
        var initial = SSEFrame.retry(milliseconds: app.configuration.retryMilliseconds)
        for f in frames { initial += f }
        stream.start(responder: responder, initial: initial)
    }

    private func fail(_ error: StoreError) {
        cluster.failed(error)
        if !started, let responder {
            ended = true
            self.responder = nil
            responder.send(Application.response(to: error, cluster: cluster, sessionID: sessionID))
            stream.onClosed?()
            stream.onClosed = nil
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

extension Application {
    /// `GET /api/sessions/{id}/events` in cluster mode, on the request's loop.
    func clusterOpenStream(_ cluster: ClusterNode, id: String, _ req: HTTPRequest, _ res: HTTPResponder) {
        guard let home = home(of: id) else { return res.send(Application.noSession(id)) }
        let index = req.loop.index
        if req.method == .HEAD {
            return cluster.stores[index].load(sessionID: id) { result in
                switch result {
                case .success: res.send(HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")]))
                case .failure(let error): res.send(Application.response(to: error, cluster: cluster, sessionID: id))
                }
            }
        }
        // A stream starts only once its subscription is confirmed: while Redis is away it would wait
        // without an answer, so it is refused like every other request that needs Redis.
        guard cluster.subscribers[index].connection.state == .ready, cluster.stores[index].connection.state == .ready
        else {
            return res.send(Application.response(to: .unavailable("not connected"), cluster: cluster, sessionID: id))
        }
        let state = cluster.perLoop[index]
        let limit = configuration.maxStreamsPerSession
        // This loop's own count is a lower bound of the cluster's: refused without a round trip.
        guard (state.value.fed[id]?.streams.count ?? 0) < limit else {
            return res.send(Application.tooManyStreams(id, limit))
        }
        // The limit is cluster-wide: the session's set of open streams in the store admits this one (one
        // round trip), or refuses it when `limit` streams on any nodes count.
        let member = cluster.streamMember(loop: index, state.value.nextStream)
        state.value.nextStream += 1
        cluster.stores[index].admitStream(
            sessionID: id, member: member, limit: limit, ttlMilliseconds: cluster.streamDeadlineMilliseconds
        ) { [unowned self] result in
            switch result {
            case .success(true):
                self.clusterStartStream(cluster, id: id, member: member, home: home, req, res)
            case .success(false):
                res.send(Application.tooManyStreams(id, limit))
            case .failure(let error):
                cluster.failed(error)
                res.send(Application.response(to: error, cluster: cluster, sessionID: id))
            }
        }
    }

    /// `429`: session `id` has its `limit` of open event streams.
    static func tooManyStreams(_ id: String, _ limit: Int) -> HTTPResponse {
        .problem(
            status: 429,
            detail: "session '\(id)' already has \(limit) open event streams (the limit, counted across the cluster)",
            headers: [("Retry-After", "5")])
    }

    /// Starts an admitted stream: fed by the session's subscription on this loop (made by its first
    /// stream), released from the session's set of open streams when it closes (request loop).
    private func clusterStartStream(
        _ cluster: ClusterNode, id: String, member: String, home: SessionLoop, _ req: HTTPRequest,
        _ res: HTTPResponder
    ) {
        let index = req.loop.index
        let state = cluster.perLoop[index]
        let fed = state.value.fed[id] ?? FedSession(slot: state.value.takeSlot(of: cluster.streamedCheckSlices))
        let lastEventID = req.header("Last-Event-ID").flatMap { Int($0.trimmingHTTPWhitespace()) }
        let stream = SessionStream(sessionID: id, sessionHome: home, host: sessionLoops[index])
        let cs = ClusterStream(
            sessionID: id, member: member, lastEventID: lastEventID, stream: stream, responder: res, app: self,
            cluster: cluster)
        stream.snapshotSource = { [unowned cs] done in cs.snapshotFrame(done) }
        // Two round trips at most before the first byte (the subscription's confirmation, then the
        // snapshot or the replay), each bounded by the command time-out.
        cs.armStartDeadline(after: 2 * cluster.settings.redis.commandTimeout + 1)
        let feed = cluster.feeds[index]
        let store = cluster.stores[index]
        stream.onClosed = { [unowned fed, unowned cs] in
            fed.streams.removeAll { $0 === cs }
            if fed.streams.isEmpty, state.value.fed[id] === fed {
                let subscribed = !fed.local
                state.value.fed[id] = nil  // the last reference to `fed`: read nothing of it after this
                if subscribed { feed.unsubscribe(sessionID: id) }
            }
            // Best effort: if this is lost (Redis away, the node killed), the deadline ends the count.
            store.releaseStream(sessionID: id, member: member) { _ in }
        }
        fed.streams.append(cs)
        if state.value.fed[id] == nil {
            state.value.fed[id] = fed
            if index == home.loop.index, state.value.owned[id] != nil {
                // Run on this very loop: its commits feed the streams (`deliverLocally`), without a round
                // trip through Redis's pub/sub for the node's own events, until the session leaves it.
                fed.followCommits()
            } else {
                fed.follow(feed, sessionID: id)
            }
        } else if fed.subscribed {
            cs.resync()
        }
    }

    /// Hands the events a commit on this loop just stored (`ids` in order) to the streams of session
    /// `id` this loop feeds from its own commits (`FedSession.local`); each is written once, in order, as
    /// if it had come from the channel (owner loop).
    func deliverLocally(_ id: String, _ events: [[UInt8]], ids: [UInt64], cluster: ClusterNode, loop: Int) {
        guard let fed = cluster.perLoop[loop].value.fed[id], fed.local, ids.count == events.count else { return }
        for (i, eventID) in ids.enumerated() {
            let event = StoredEvent(id: eventID, payload: events[i])
            for s in fed.streams { s.live(event) }
        }
    }
}
