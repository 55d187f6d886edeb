import EventHTTP
import JSON
import RedisClient

/// An input that reached a node not holding the session's live lease, forwarded through Redis to the
/// owner: `PUBLISH <prefix>:s:{id}:in` (the owner subscribes while it runs the session), and the
/// owner's answer comes back on the sender loop's own reply channel once the input is committed.
/// Wire form: `ForwardWire` (`fi1`), fields flags (`d` a delete, `k` a key follows), session, view
/// model, input, Idempotency-Key (empty without `k`), reply channel, correlation, value (JSON).
struct ForwardedInput {
    /// True for a forwarded `DELETE` (the other fields are then empty).
    var isDelete = false
    var sessionID: String
    var viewModel: String
    var input: String
    var value: JSONValue
    var idempotencyKey: String?

    func encode(replyTo: String, correlation: Int) -> [UInt8] {
        var w = ForwardWire.Writer(tag: ForwardWire.inputTag, capacity: 96 + sessionID.utf8.count + replyTo.utf8.count)
        w.field((isDelete ? "d" : "") + (idempotencyKey == nil ? "" : "k"))
        w.field(sessionID)
        w.field(viewModel)
        w.field(input)
        w.field(idempotencyKey ?? "")
        w.field(replyTo)
        w.field(correlation)
        w.field(value.bytes)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> (ForwardedInput, replyTo: String, correlation: Int)? {
        var r = ForwardWire.Reader(bytes, tag: ForwardWire.inputTag)
        guard let flags = r.field(), let s = r.string(), let m = r.string(), let i = r.string(), let k = r.string(),
            let replyTo = r.string(), let c = r.int(), let v = r.field(), r.atEnd,
            let value = try? JSONValue.parse(v)
        else { return nil }
        let input = ForwardedInput(
            isDelete: flags.contains(UInt8(ascii: "d")), sessionID: s, viewModel: m, input: i, value: value,
            idempotencyKey: flags.contains(UInt8(ascii: "k")) ? k : nil)
        return (input, replyTo, c)
    }
}

/// An answer on its way back: the correlation number and the HTTP response to send.
/// `moved` marks the answer of a node that does not run the session (any more): the input was not
/// applied there, and another receiver of the same `PUBLISH` may be applying it (a node that just took
/// the session over while the one it took it from was still unsubscribing).
/// Wire form: `ForwardWire` (`fr1`), fields flags (`m` moved), correlation, status, header count, each
/// header's name and value, body.
enum ForwardedReply {
    static func encode(correlation: Int, _ r: HTTPResponse, moved: Bool = false) -> [UInt8] {
        var w = ForwardWire.Writer(tag: ForwardWire.replyTag, capacity: 64 + r.body.count + 48 * r.headers.count)
        w.field(moved ? "m" : "")
        w.field(correlation)
        w.field(r.status)
        w.field(r.headers.count)
        for (name, value) in r.headers {
            w.field(name)
            w.field(value)
        }
        w.field(r.body)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> (correlation: Int, response: HTTPResponse, moved: Bool)? {
        var r = ForwardWire.Reader(bytes, tag: ForwardWire.replyTag)
        guard let flags = r.field(), let c = r.int(), let status = r.int(), let count = r.int(),
            (0...64).contains(count)
        else { return nil }
        var headers: [(String, String)] = []
        headers.reserveCapacity(count)
        for _ in 0..<count {
            guard let name = r.string(), let value = r.string() else { return nil }
            headers.append((name, value))
        }
        guard let body = r.field(), r.atEnd else { return nil }
        return (c, HTTPResponse(status: status, headers: headers, body: Array(body)), flags.contains(UInt8(ascii: "m")))
    }
}

/// The wire form of the forwarding messages (`ForwardedInput`, `ForwardedReply`): a tag naming the
/// message and its version (`fi1\n`, `fr1\n`), then fields, each `<decimal length>:<bytes>`. Written
/// and read in one pass with no intermediate tree: JSON here cost ~70,000 instructions per forwarded
/// input across the two nodes (docs/BENCHMARKS.md). A message with another tag (a node of another
/// version) or a malformed one decodes to nil and is dropped (`Application.dropUnreadable`: a warning
/// in the log); its sender answers `503` after its forwarding time-out.
enum ForwardWire {
    static let inputTag: [UInt8] = Array("fi1\n".utf8)
    static let replyTag: [UInt8] = Array("fr1\n".utf8)
    /// The longest length prefix a reader accepts (a field is at most a Redis message: 512 MB < 10⁹).
    static let maxLengthDigits = 9

    struct Writer {
        private(set) var bytes: [UInt8]

        init(tag: [UInt8], capacity: Int) {
            bytes = []
            bytes.reserveCapacity(capacity)
            bytes.append(contentsOf: tag)
        }

        mutating func field(_ content: some Collection<UInt8>) {
            JSONValue.writeInt(content.count, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            bytes.append(contentsOf: content)
        }

        mutating func field(_ s: String) { field(s.utf8) }

        mutating func field(_ n: Int) {
            var digits = n < 0 ? 2 : 1
            var rest = n.magnitude
            while rest >= 10 {
                rest /= 10
                digits += 1
            }
            JSONValue.writeInt(digits, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONValue.writeInt(n, into: &bytes)
        }
    }

    struct Reader {
        private let bytes: [UInt8]
        private var index: Int
        private var valid: Bool

        init(_ bytes: [UInt8], tag: [UInt8]) {
            self.bytes = bytes
            valid = bytes.starts(with: tag)
            index = tag.count
        }

        /// True when every byte was read and nothing was malformed.
        var atEnd: Bool { valid && index == bytes.count }

        /// The next field's bytes, or nil (malformed, or no field left).
        mutating func field() -> ArraySlice<UInt8>? {
            guard valid else { return nil }
            var length = 0
            var digits = 0
            while index < bytes.count, bytes[index] != UInt8(ascii: ":") {
                let d = bytes[index] &- UInt8(ascii: "0")
                guard d < 10, digits < ForwardWire.maxLengthDigits else { return invalid() }
                length = length * 10 + Int(d)
                digits += 1
                index += 1
            }
            guard digits > 0, index < bytes.count, bytes.count - (index + 1) >= length else { return invalid() }
            let start = index + 1
            index = start + length
            return bytes[start..<index]
        }

        mutating func string() -> String? { field().map { String(decoding: $0, as: UTF8.self) } }

        /// A decimal integer field (an optional `-`, then 1 to 18 digits).
        mutating func int() -> Int? {
            guard var digits = field() else { return nil }
            let negative = digits.first == UInt8(ascii: "-")
            if negative { digits = digits.dropFirst() }
            guard (1...18).contains(digits.count) else { return invalid() }
            var n = 0
            for b in digits {
                let d = b &- UInt8(ascii: "0")
                guard d < 10 else { return invalid() }
                n = n * 10 + Int(d)
            }
            return negative ? -n : n
        }

        private mutating func invalid<T>() -> T? {
            valid = false
            return nil
        }
    }
}

/// A forwarded input waiting for the owner's answer (sender loop only).
struct PendingForward {
    var reply: (HTTPResponse) -> Void
    var timer: LoopTimer
    var sessionID: String
    /// How many subscribers the `PUBLISH` reached (nil until its reply is in).
    var receivers: Int?
    /// `moved` answers so far, and the last one: used only once every receiver has answered `moved`.
    var movedAnswers = 0
    var moved: HTTPResponse?

    /// The answer to give once every receiver of the `PUBLISH` has answered `moved` (nil until then).
    var allMoved: HTTPResponse? {
        guard let moved, let receivers, movedAnswers >= receivers else { return nil }
        return moved
    }
}

extension Application {
    /// Sends `input` to the session's owner through Redis and answers with the owner's answer, or `503`
    /// (nobody runs it right now, or no answer in time) (loop `home`). When the `PUBLISH` reaches nobody
    /// (the input went nowhere) and `onNobody` is given, `onNobody` runs instead of the `503`.
    func forward(
        _ input: ForwardedInput, cluster: ClusterNode, home: SessionLoop, remainingMilliseconds ms: Int,
        reply: @escaping (HTTPResponse) -> Void, onNobody: (() -> Void)? = nil
    ) {
        let index = home.loop.index
        let state = cluster.perLoop[index]
        state.value.nextForward += 1
        let correlation = state.value.nextForward
        let timer = home.loop.schedule(after: cluster.forwardTimeout) {
            guard let pending = state.value.forwards.removeValue(forKey: correlation) else { return }
            pending.reply(
                .problem(
                    status: 503,
                    detail: "the node running session '\(input.sessionID)' did not answer in time; the input may have "
                        + "been applied: retry with the same Idempotency-Key", headers: [("Retry-After", "1")]))
        }
        state.value.forwards[correlation] = PendingForward(reply: reply, timer: timer, sessionID: input.sessionID)
        let payload = input.encode(replyTo: cluster.replyChannels[index], correlation: correlation)
        cluster.stores[index].connection.send([
            "PUBLISH", RedisArg(cluster.inputChannel(input.sessionID)), RedisArg(bytes: payload),
        ]) { result in
            if case .success(let v) = result, let n = v.int, n > 0 {
                cluster.metrics.crossNodeInputs.increment()
                // The owner got it: its answer (or the timer) completes the request.
                guard var pending = state.value.forwards[correlation] else { return }
                pending.receivers = Int(n)
                state.value.forwards[correlation] = pending
                if let moved = pending.allMoved {
                    Application.complete(correlation, with: moved, cluster: cluster, loop: index)
                }
                return
            }
            guard let pending = state.value.forwards.removeValue(forKey: correlation) else { return }
            pending.timer.cancel()
            if case .success = result, let onNobody { return onNobody() }
            if case .failure = result {
                cluster.metrics.redisErrors.increment()
                return pending.reply(
                    .problem(
                        status: 503, detail: "the cluster's Redis is unavailable; retry",
                        headers: [("Retry-After", "1")]))
            }
            let seconds = max(1, (ms + 999) / 1000)
            pending.reply(
                .problem(
                    status: 503,
                    detail: "the node running session '\(input.sessionID)' is not reachable; another node takes it "
                        + "over when its lease ends (in \(seconds) s at most)",
                    headers: [("Retry-After", String(seconds))]))
        }
    }

    /// The owner's side: a forwarded input arrived on the session's input channel (owner loop `home`).
    func receiveForwarded(_ payload: [UInt8], cluster: ClusterNode, home: SessionLoop) {
        guard let (input, replyTo, correlation) = ForwardedInput.decode(payload) else {
            return dropUnreadable(payload, cluster: cluster, loop: home.loop.index)
        }
        let store = cluster.stores[home.loop.index]
        let publish: (HTTPResponse, Bool) -> Void = { response, moved in
            let bytes = ForwardedReply.encode(correlation: correlation, response, moved: moved)
            store.connection.send(["PUBLISH", RedisArg(replyTo), RedisArg(bytes: bytes)]) { _ in }
        }
        let reply: (HTTPResponse) -> Void = { publish($0, false) }
        guard let owned = cluster.perLoop[home.loop.index].value.owned[input.sessionID] else {
            return publish(
                Application.response(to: .unavailable("moved"), cluster: cluster, sessionID: input.sessionID), true)
        }
        if input.isDelete { return deleteOwned(owned, cluster: cluster, reply: reply) }
        applyInput(
            owned, cluster: cluster, viewModel: input.viewModel, input: input.input, value: input.value,
            key: input.idempotencyKey, reply: reply)
    }

    /// The sender's side: an owner answered a forwarded input (loop `index`). A `moved` answer completes
    /// the request only once every receiver of the `PUBLISH` has answered `moved` (another receiver may
    /// be the session's new owner, applying the input); the session's remembered holder is forgotten.
    func receiveForwardReply(_ payload: [UInt8], cluster: ClusterNode, loop index: Int) {
        let state = cluster.perLoop[index]
        guard let (correlation, response, moved) = ForwardedReply.decode(payload) else {
            return dropUnreadable(payload, cluster: cluster, loop: index)
        }
        guard var pending = state.value.forwards[correlation] else { return }
        guard moved else { return Application.complete(correlation, with: response, cluster: cluster, loop: index) }
        state.value.heldElsewhere[pending.sessionID] = nil
        pending.movedAnswers += 1
        pending.moved = response
        state.value.forwards[correlation] = pending
        if let moved = pending.allMoved {
            Application.complete(correlation, with: moved, cluster: cluster, loop: index)
        }
    }

    /// A forwarding message this node cannot read (a node of another version during a rolling deploy, or
    /// damage) is dropped: its sender answers `503` after its time-out. Said in the log at most every
    /// 10 s per loop, with the number dropped since, and never with the message's content (it may hold a
    /// user's input).
    func dropUnreadable(_ payload: [UInt8], cluster: ClusterNode, loop index: Int) {
        let state = cluster.perLoop[index]
        state.value.unreadable += 1
        let t = now()
        if let last = state.value.unreadableLoggedAt, t - last < 10 { return }
        logger.warning(
            "cluster: unreadable forwarding message dropped (a node of another version?)",
            metadata: [
                "dropped": "\(state.value.unreadable)", "bytes": "\(payload.count)",
                "tag": "\(String(decoding: payload.prefix(3).filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self))",
            ])
        state.value.unreadable = 0
        state.value.unreadableLoggedAt = t
    }

    /// Answers the forwarded input `correlation` of loop `index` with `response` (once).
    static func complete(_ correlation: Int, with response: HTTPResponse, cluster: ClusterNode, loop index: Int) {
        guard let pending = cluster.perLoop[index].value.forwards.removeValue(forKey: correlation) else { return }
        pending.timer.cancel()
        pending.reply(response)
    }

    /// Forwards `input` without asking Redis who holds the lease when this loop saw another node's live
    /// lease on the session recently (`ClusterLoopState.heldElsewhere`, until that lease's remaining time
    /// then): one round trip less per forwarded input. Otherwise, or when the `PUBLISH` reaches nobody
    /// (the owner released the session and unsubscribed, or died), runs `otherwise` (the `acquire`, which
    /// may take the session over). Nothing is lost or applied twice by skipping `acquire`: whoever
    /// receives the input is subscribed because it runs the session (its commits are fenced), a
    /// `PUBLISH` that reached nobody delivered the input nowhere, and a node that no longer runs the
    /// session answers `moved` (loop `home`).
    func forwardToKnownHolder(
        _ input: ForwardedInput, cluster: ClusterNode, home: SessionLoop, reply: @escaping (HTTPResponse) -> Void,
        otherwise: @escaping () -> Void
    ) {
        let state = cluster.perLoop[home.loop.index]
        let id = input.sessionID
        guard state.value.owned[id] == nil, let until = state.value.heldElsewhere[id] else { return otherwise() }
        let left = until - now()
        guard left > 0 else {
            state.value.heldElsewhere[id] = nil
            return otherwise()
        }
        forward(
            input, cluster: cluster, home: home, remainingMilliseconds: Int(left * 1000), reply: reply,
            onNobody: {
                state.value.heldElsewhere[id] = nil
                otherwise()
            })
    }

    /// Remembers that another node holds session `id`'s lease for `ms` more milliseconds (loop `home`).
    func rememberHolder(_ id: String, remainingMilliseconds ms: Int, cluster: ClusterNode, home: SessionLoop) {
        let state = cluster.perLoop[home.loop.index]
        let t = now()
        if state.value.heldElsewhere.count >= 4096 {
            state.value.heldElsewhere = state.value.heldElsewhere.filter { $0.value > t }
        }
        state.value.heldElsewhere[id] = t + Double(ms) / 1000
    }

    /// Every `streamedCheckInterval`, each loop checks the sessions it streams (a slice of them every
    /// `streamedCheckInterval / streamedCheckSlices`, each session in its own slice), one round trip each
    /// (`renewStreams`, on the loop's own connection): their streams here get a new deadline in the
    /// session's cluster-wide set of open streams, the session's keys their idle expiry (a session
    /// watched on any node does not expire, as in single-process mode), and the answer names the lease's
    /// holder. One whose lease nobody holds (its owner died, `kill -9`) is then acquired and taken over
    /// even if no request comes (a search it was loading completes, the streams see it): one more round
    /// trip, only then.
    func startOrphanChecks(_ cluster: ClusterNode) {
        for (index, state) in cluster.perLoop.enumerated() {
            let loop = state.loop
            loop.execute { [unowned self] in
                let slices = cluster.streamedCheckSlices
                state.value.orphanTimer = loop.scheduleRepeating(every: cluster.streamedCheckInterval / Double(slices))
                {
                    [unowned self] in
                    let slice = state.value.orphanSlice
                    state.value.orphanSlice = (slice + 1) % slices
                    for (id, fed) in state.value.fed where fed.slot == slice {
                        self.checkStreamed(id, members: fed.streams.map { $0.member }, cluster: cluster, from: index)
                    }
                }
            }
        }
    }

    private func checkStreamed(_ id: String, members: [String], cluster: ClusterNode, from index: Int) {
        guard let home = home(of: id) else { return }
        cluster.stores[index].renewStreams(
            sessionID: id, members: members, ttlMilliseconds: cluster.streamDeadlineMilliseconds
        ) { [unowned self] result in
            home.loop.runOrExecute { [unowned self] in
                if let owned = cluster.perLoop[home.loop.index].value.owned[id] {
                    owned.session.lastActivity = self.now()  // watched here: not idle
                    return
                }
                // A live lease elsewhere: nothing to do. Free, or this loop's own (the session left this
                // node after a failed commit): acquire it.
                guard case .success(let holder) = result, holder == nil || holder == cluster.holders[home.loop.index]
                else { return }
                self.withOwned(id, cluster: cluster, home: home, reply: { _ in }, onHeld: { _ in }) { _ in }
            }
        }
    }

    /// Subscribes every loop to its reply channel (at start).
    func subscribeForwardReplies(_ cluster: ClusterNode) {
        for (index, subscriber) in cluster.subscribers.enumerated() {
            let channel = cluster.replyChannels[index]
            subscriber.connection.loop.execute { [unowned self] in
                subscriber.subscribe(channel: channel) { message in
                    self.receiveForwardReply(message.payload, cluster: cluster, loop: index)
                }
            }
        }
    }
}
