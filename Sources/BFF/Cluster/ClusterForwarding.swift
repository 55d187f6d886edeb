import EventHTTP
import JSON
import RedisClient

/// An input that reached a node not holding the session's live lease, forwarded through Redis to the
/// owner: `PUBLISH <prefix>:s:{id}:in` (the owner subscribes while it runs the session), and the
/// owner's answer comes back on the sender loop's own reply channel once the input is committed.
struct ForwardedInput {
    /// True for a forwarded `DELETE` (the other fields are then empty).
    var isDelete = false
    var sessionID: String
    var viewModel: String
    var input: String
    var value: JSONValue
    var idempotencyKey: String?

    func encode(replyTo: String, correlation: Int) -> [UInt8] {
        JSONValue.object([
            "s": .string(sessionID), "m": .string(viewModel), "i": .string(input), "v": value,
            "k": idempotencyKey.map { .string($0) } ?? .null, "r": .string(replyTo), "c": .int(correlation),
            "d": .bool(isDelete),
        ]).bytes
    }

    static func decode(_ bytes: [UInt8]) -> (ForwardedInput, replyTo: String, correlation: Int)? {
        guard let v = try? JSONValue.parse(bytes), let s = v["s"]?.stringValue, let m = v["m"]?.stringValue,
            let i = v["i"]?.stringValue, let r = v["r"]?.stringValue, let c = v["c"]?.intValue
        else { return nil }
        let input = ForwardedInput(
            isDelete: v["d"] == .bool(true), sessionID: s, viewModel: m, input: i, value: v["v"] ?? .null,
            idempotencyKey: v["k"]?.stringValue)
        return (input, r, c)
    }
}

/// An answer on its way back: the correlation number and the HTTP response to send.
/// `moved` (`"m": true`) marks the answer of a node that does not run the session (any more): the input
/// was not applied there, and another receiver of the same `PUBLISH` may be applying it (a node that
/// just took the session over while the one it took it from was still unsubscribing). Nodes that do not
/// know the mark ignore it.
enum ForwardedReply {
    static func encode(correlation: Int, _ r: HTTPResponse, moved: Bool = false) -> [UInt8] {
        let headers = r.headers.map { JSONValue.array([.string($0.0), .string($0.1)]) }
        var object: JSONObject = [
            "c": .int(correlation), "s": .int(r.status), "h": .array(headers),
            "b": .string(String(decoding: r.body, as: UTF8.self)),
        ]
        if moved { object["m"] = .bool(true) }
        return JSONValue.object(object).bytes
    }

    static func decode(_ bytes: [UInt8]) -> (correlation: Int, response: HTTPResponse, moved: Bool)? {
        guard let v = try? JSONValue.parse(bytes), let c = v["c"]?.intValue, let s = v["s"]?.intValue,
            case .array(let hs)? = v["h"], let b = v["b"]?.stringValue
        else { return nil }
        var headers: [(String, String)] = []
        for h in hs {
            guard case .array(let kv) = h, kv.count == 2, let k = kv[0].stringValue, let value = kv[1].stringValue
            else { return nil }
            headers.append((k, value))
        }
        return (c, HTTPResponse(status: s, headers: headers, body: Array(b.utf8)), v["m"] == .bool(true))
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
        guard let (input, replyTo, correlation) = ForwardedInput.decode(payload) else { return }
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
        guard let (correlation, response, moved) = ForwardedReply.decode(payload),
            var pending = state.value.forwards[correlation]
        else { return }
        guard moved else { return Application.complete(correlation, with: response, cluster: cluster, loop: index) }
        state.value.heldElsewhere[pending.sessionID] = nil
        pending.movedAnswers += 1
        pending.moved = response
        state.value.forwards[correlation] = pending
        if let moved = pending.allMoved {
            Application.complete(correlation, with: moved, cluster: cluster, loop: index)
        }
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

    /// Every `streamedCheckInterval`, each loop checks the sessions it streams, one round trip each
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
                state.value.orphanTimer = loop.scheduleRepeating(every: cluster.streamedCheckInterval) {
                    [unowned self] in
                    for (id, fed) in state.value.fed {
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
