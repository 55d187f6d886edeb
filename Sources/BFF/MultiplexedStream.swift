import EventHTTP
import JSON

/// One event stream carrying several sessions (`GET /api/events?sessions=…`): how one browser holds a
/// single connection for all its tabs, each with its own session (docs/API.md, "Multiplexed event
/// stream"). Every rule of a session's own stream holds per session: its snapshot or gapless replay
/// first, its events in order, its `end`, and the per-session stream limit (each member counts as one
/// of its session's streams).
///
/// - Opening: each member is attached to its session through the backend (`SessionBackend.openStream`);
///   the head is sent once every member has answered, so a list of sessions none of which exists is a
///   `404` (or the members' common refusal), not an empty stream. Then, in list order, each member's
///   first frames (or its `end` when it was refused), then what arrived meanwhile.
/// - Framing: an event keeps its session stream's `event:` name and its JSON `data:` object, with
///   `"session": ID` added (and `"seq": N`, the session's event id, for view-model events). Its `id:`
///   is the stream's position: the last event id written of each member, in list order, joined by `.`,
///   empty for a member with none; the browser's own reconnect sends it back as `Last-Event-ID`, and
///   every member resumes from its own position.
/// - A member never gets an event twice or out of order: one whose id is not above the member's
///   position is dropped (a live event that a snapshot already covers).
/// - Back-pressure, per connection as for a single stream: past the high-water mark state frames are
///   dropped and signals kept; once drained, every member asks for a fresh snapshot, and then the kept
///   signals, each member's snapshot and what came for it after that snapshot are written.
/// - A member whose session ends gets its `end` and leaves; when none is left the response ends.
///
/// Threading: host loop only. Members are its sinks; their sessions hold them as `LoopBoundReference`.
final class MultiplexedStream: HostedStream, HTTPStreamCloseObserver {
    private enum Mode { case opening, live, behind, catchingUp }

    unowned let host: LoopSessions
    private var response: SSEResponse
    private(set) var members: [Member] = []
    private var mode = Mode.opening
    /// Members that have not answered yet (opening), or whose snapshot has not come (catching up).
    private var waiting = 0
    /// Signals kept while behind, with their member.
    private var pendingSignals: [(member: Member, frame: [UInt8])] = []
    /// Answers the request when no member could be attached.
    private let refuse: (SessionFailure) -> Void
    var hostedIndex: Int32 = -1

    /// A stream for `sessions` (`id`, and the last event id the client has of it) on `host`, for the
    /// request `responder` answers; `refuse` answers it when no session can be streamed (host loop).
    init(
        sessions: [(id: String, lastEventID: Int?)], host: LoopSessions, responder: HTTPResponder,
        refuse: @escaping (SessionFailure) -> Void
    ) {
        self.host = host
        self.refuse = refuse
        response = SSEResponse(responder)
        members = sessions.enumerated().map {
            Member(stream: self, index: $0.offset, sessionID: $0.element.id, position: $0.element.lastEventID)
        }
        waiting = members.count
    }

    /// The stream's position: each member's last written event id (or the one it resumed after), in
    /// list order, joined by `.`.
    var position: String {
        var out = ""
        for (i, m) in members.enumerated() {
            if i > 0 { out += "." }
            if let p = m.position { out += String(p) }
        }
        return out
    }

    // MARK: opening

    /// A member answered (started or refused); once all have, the response starts or is refused.
    fileprivate func answered() {
        guard mode == .opening else { return }
        waiting -= 1
        guard waiting == 0 else { return }
        guard members.contains(where: { $0.phase == .started }) else {
            let failure = members.compactMap(\.refusal).first ?? .notFound
            response.forget()
            mode = .live
            release()
            return refuse(failure)
        }
        var initial = SSEFrame.retry(milliseconds: host.env.configuration.retryMilliseconds)
        for m in members {
            switch m.phase {
            case .started:
                for f in m.takeBuffered() { m.write(f, into: &initial) }
            case .refused:
                m.writeEnd(reason: m.refusal.map(MultiplexedStream.reason) ?? "notFound", into: &initial)
            case .waiting, .ended: break
            }
        }
        mode = .live
        guard response.start(initial: initial, observer: self) != nil else { return closed() }
        host.register(self)
        if !members.contains(where: { $0.phase == .started }) { end() }
    }

    /// The `end` reason of a member refused at opening.
    private static func reason(_ f: SessionFailure) -> String {
        switch f {
        case .notFound: "notFound"
        case .tooManyStreams: "tooManyStreams"
        default: "unavailable"
        }
    }

    // MARK: writing

    fileprivate func deliver(_ frame: [UInt8], isSignal: Bool, from member: Member) {
        switch mode {
        case .opening:
            member.buffer(frame)
            if member.bufferedCount > SessionStream.maxPendingSignals { close() }
        case .live:
            guard response.http != nil else { return }
            if response.queuedBytes < host.env.configuration.streamHighWaterBytes {
                var out: [UInt8] = []
                member.write(frame, into: &out)
                if !out.isEmpty { response.write(out) }
                return
            }
            mode = .behind
            host.watchBehind(self)
            keep(frame, isSignal: isSignal, from: member)
        case .behind:
            keep(frame, isSignal: isSignal, from: member)
        case .catchingUp:
            if member.catchUpSnapshot != nil {
                member.buffer(frame)  // after its fresh snapshot: written after it
                if member.bufferedCount > SessionStream.maxPendingSignals { close() }
            } else {
                keep(frame, isSignal: isSignal, from: member)
            }
        }
    }

    /// Behind: a signal is kept (bounded), a state frame dropped (the member's fresh snapshot covers it).
    private func keep(_ frame: [UInt8], isSignal: Bool, from member: Member) {
        if isSignal {
            pendingSignals.append((member, frame))
            if pendingSignals.count > SessionStream.maxPendingSignals { close() }
        } else {
            host.env.metrics.coalesced.increment()
        }
    }

    func checkDrained() -> Bool {
        guard response.http != nil else { return true }
        guard mode == .behind else { return mode == .live }
        guard response.queuedBytes <= host.env.configuration.streamHighWaterBytes / 4 else { return false }
        mode = .catchingUp
        let live = members.filter { $0.phase == .started }
        waiting = live.count
        for m in live { m.requestSnapshot() }
        if waiting == 0 { finishCatchUp() }
        return true
    }

    /// A member's fresh snapshot came (catching up).
    fileprivate func snapshotArrived() {
        guard mode == .catchingUp else { return }
        waiting -= 1
        if waiting == 0 { finishCatchUp() }
    }

    /// Writes the kept signals, then each member's fresh snapshot and what came for it after it.
    private func finishCatchUp() {
        var out: [UInt8] = []
        for (m, f) in pendingSignals where m.phase == .started { m.write(f, into: &out) }
        pendingSignals = []
        for m in members where m.phase == .started {
            if let s = m.catchUpSnapshot { m.write(s, into: &out) }
            m.catchUpSnapshot = nil
            for f in m.takeBuffered() { m.write(f, into: &out) }
        }
        mode = .live
        response.write(out)
    }

    // MARK: ends

    /// A member's session ended: its `end`, then the response ends when no member is left.
    fileprivate func memberEnded(_ member: Member, endFrame: [UInt8]) {
        if mode == .opening {
            member.buffer(endFrame)
            return
        }
        var out: [UInt8] = []
        member.write(endFrame, into: &out)
        response.write(out)
        if !members.contains(where: { $0.phase == .started }) { end() }
    }

    func keepAliveTick() {
        if mode == .live { response.keepAliveTick() }
    }

    func broadcast(_ frame: [UInt8]) {
        for m in members where m.phase == .started { deliver(frame, isSignal: false, from: m) }
    }

    func shutdown(with endFrame: [UInt8]) {
        guard response.http != nil else { return }
        var out: [UInt8] = []
        for (m, f) in pendingSignals where m.phase == .started { m.write(f, into: &out) }
        pendingSignals = []
        for m in members where m.phase == .started { m.write(endFrame, into: &out) }
        response.write(out)
        end()
    }

    /// Ends the response once every member has left (their sessions are done with them).
    private func end() {
        response.end()
        host.unregister(self)
        release()
    }

    /// Every member leaves its session, and the stream lets go of its members (they hold it).
    private func release() {
        for m in members { m.leave() }
        members = []
        pendingSignals = []
    }

    /// Ends the response (too far behind on signals); the client reconnects with `Last-Event-ID`.
    private func close() {
        response.end()
        closed()
    }

    func httpStreamPeerLeft() { closed() }

    /// The peer went away (or the head could not be sent): every member leaves its session.
    private func closed() {
        response.forget()
        host.unregister(self)
        release()
    }
}

extension MultiplexedStream {
    /// One session's part of a multiplexed stream: the sink its session feeds (host loop only).
    final class Member: SessionEventSink {
        enum Phase { case waiting, started, refused, ended }

        /// Its stream (strong: while opening, nothing else holds the stream; the cycle is broken when the
        /// stream ends, `MultiplexedStream.release`).
        let stream: MultiplexedStream
        let index: Int
        let sessionID: String
        var host: LoopSessions { stream.host }
        unowned var sessionOwner: LoopSessions?
        unowned var externalFeed: ExternalFeed?
        private(set) var phase = Phase.waiting
        private(set) var refusal: SessionFailure?
        /// The last event id written of this session (nil: none yet, or it ended).
        private(set) var position: Int?
        /// Frames held until they may be written (opening; after a fresh snapshot while catching up).
        private var buffered: [[UInt8]] = []
        /// The fresh snapshot frame, while the stream catches up.
        fileprivate var catchUpSnapshot: [UInt8]?
        /// The `"session":"ID"` member inserted into every data object.
        private let sessionMember: [UInt8]

        /// A member resuming after `position` (the last event id the client has of the session), if any.
        init(stream: MultiplexedStream, index: Int, sessionID: String, position: Int?) {
            self.stream = stream
            self.index = index
            self.sessionID = sessionID
            self.position = position
            var m: [UInt8] = Array(#""session":"#.utf8)
            JSONValue.writeString(sessionID, into: &m)
            sessionMember = m
        }

        var bufferedCount: Int { buffered.count }

        func buffer(_ frame: [UInt8]) { buffered.append(frame) }

        func takeBuffered() -> [[UInt8]] {
            defer { buffered = [] }
            return buffered
        }

        // MARK: SessionEventSink

        func start(initial: [UInt8]) {
            guard phase == .waiting else { return }
            phase = .started
            // `initial` is one or more frames (a snapshot, or a replay): kept as one, split when written.
            if !initial.isEmpty { buffered.insert(initial, at: 0) }
            stream.answered()
        }

        /// The backend could not attach this member (host loop).
        func refused(_ failure: SessionFailure) {
            guard phase == .waiting else { return }
            phase = .refused
            refusal = failure
            stream.answered()
        }

        func deliverFromSession(_ frame: [UInt8], isSignal: Bool) {
            guard phase == .started else { return }
            stream.deliver(frame, isSignal: isSignal, from: self)
        }

        func finish(with endFrame: [UInt8]) {
            guard phase == .started else { return }
            stream.memberEnded(self, endFrame: endFrame)
        }

        // MARK: writing (the stream calls these)

        /// Appends `frames` (one or more whole frames of this session, as `SSEFrame` makes them) to
        /// `out`, re-framed for the multiplexed stream. A snapshot always goes out and sets `position` (it
        /// is the whole state at its id); any other event not above `position` is dropped (a replay or a
        /// live event the client already has); an `end` ends the member.
        func write(_ frames: [UInt8], into out: inout [UInt8]) {
            var rest = frames[...]
            while let frame = SSEFrame.Parts(&rest) {
                guard phase == .started else { return }
                if let id = frame.id {
                    if !frame.isSnapshot, let p = position, id <= p { continue }
                    position = id
                }
                let isEnd = frame.name.elementsEqual("end".utf8)
                if isEnd {
                    phase = .ended
                    position = nil
                }
                appendFrame(
                    name: frame.name, data: frame.data, seq: isEnd || frame.isSnapshot ? nil : frame.id, to: &out)
                if isEnd { leave() }
            }
        }

        /// Appends this member's `end` with `reason` (a member refused at opening).
        func writeEnd(reason: String, into out: inout [UInt8]) {
            var data: [UInt8] = []
            JSONValue.object(["reason": .string(reason)]).write(into: &data)
            appendFrame(name: "end".utf8, data: data[...], seq: nil, to: &out)
            phase = .ended
        }

        private func appendFrame(
            name: some Collection<UInt8>, data: ArraySlice<UInt8>, seq: Int?, to out: inout [UInt8]
        ) {
            out.append(contentsOf: "id: ".utf8)
            out.append(contentsOf: stream.position.utf8)
            out.append(contentsOf: "\nevent: ".utf8)
            out.append(contentsOf: name)
            out.append(contentsOf: "\ndata: {".utf8)
            out.append(contentsOf: sessionMember)
            if let seq {
                out.append(contentsOf: #","seq":"#.utf8)
                JSONValue.writeInt(seq, into: &out)
            }
            // The session's own object without its `{`: `}` alone, or `,` and its members.
            let body = data.dropFirst()
            if body.first != UInt8(ascii: "}") { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: body)
            out.append(contentsOf: [0x0A, 0x0A])
        }

        /// Asks for a fresh snapshot (catching up): from the session's loop here, or the cluster's store.
        func requestSnapshot() {
            if let externalFeed {
                externalFeed.snapshotFrame { [weak self] frame in self?.snapshotCame(frame) }
                return
            }
            guard let owner = sessionOwner else { return snapshotCame(nil) }
            let (id, link) = (sessionID, self.link)
            owner.loop.execute {
                let frame = owner.sessions[id].map { $0.snapshotFrame }
                link.run(with: frame) { sink, frame in (sink as? Member)?.snapshotCame(frame) }
            }
        }

        private func snapshotCame(_ frame: [UInt8]?) {
            catchUpSnapshot = frame ?? []
            stream.snapshotArrived()
        }

        /// This member is done (ended, refused, or the stream closed): its session forgets it.
        func leave() {
            if phase == .started || phase == .waiting { phase = .ended }
            externalFeed?.sinkClosed()
            externalFeed = nil
            guard let owner = sessionOwner else { return }
            sessionOwner = nil
            let (id, link) = (sessionID, self.link)
            owner.loop.execute { owner.streamClosed(link, sessionID: id) }
        }
    }
}
