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
enum ForwardedReply {
    static func encode(correlation: Int, _ r: HTTPResponse) -> [UInt8] {
        let headers = r.headers.map { JSONValue.array([.string($0.0), .string($0.1)]) }
        return JSONValue.object([
            "c": .int(correlation), "s": .int(r.status), "h": .array(headers),
            "b": .string(String(decoding: r.body, as: UTF8.self)),
        ]).bytes
    }

    static func decode(_ bytes: [UInt8]) -> (correlation: Int, response: HTTPResponse)? {
        guard let v = try? JSONValue.parse(bytes), let c = v["c"]?.intValue, let s = v["s"]?.intValue,
            case .array(let hs)? = v["h"], let b = v["b"]?.stringValue
        else { return nil }
        var headers: [(String, String)] = []
        for h in hs {
            guard case .array(let kv) = h, kv.count == 2, let k = kv[0].stringValue, let value = kv[1].stringValue
            else { return nil }
            headers.append((k, value))
        }
        return (c, HTTPResponse(status: s, headers: headers, body: Array(b.utf8)))
    }
}

/// A forwarded input waiting for the owner's answer (sender loop only).
struct PendingForward {
    var reply: (HTTPResponse) -> Void
    var timer: LoopTimer
}

extension Application {
    /// Sends `input` to the session's owner through Redis and answers with the owner's answer, or `503`
    /// (nobody runs it right now, or no answer in time) (loop `home`).
    func forward(
        _ input: ForwardedInput, cluster: ClusterNode, home: SessionLoop, remainingMilliseconds ms: Int,
        reply: @escaping (HTTPResponse) -> Void
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
        state.value.forwards[correlation] = PendingForward(reply: reply, timer: timer)
        let payload = input.encode(replyTo: cluster.replyChannels[index], correlation: correlation)
        cluster.stores[index].connection.send([
            "PUBLISH", RedisArg(cluster.inputChannel(input.sessionID)), RedisArg(bytes: payload),
        ]) { result in
            if case .success(let v) = result, (v.int ?? 0) > 0 {
                cluster.metrics.crossNodeInputs.increment()
                return  // the owner got it: its answer (or the timer) completes the request
            }
            guard let pending = state.value.forwards.removeValue(forKey: correlation) else { return }
            pending.timer.cancel()
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
        let reply: (HTTPResponse) -> Void = { response in
            let bytes = ForwardedReply.encode(correlation: correlation, response)
            store.connection.send(["PUBLISH", RedisArg(replyTo), RedisArg(bytes: bytes)]) { _ in }
        }
        guard let owned = cluster.perLoop[home.loop.index].value.owned[input.sessionID] else {
            return reply(
                Application.response(to: .unavailable("moved"), cluster: cluster, sessionID: input.sessionID))
        }
        if input.isDelete { return deleteOwned(owned, cluster: cluster, reply: reply) }
        applyInput(
            owned, cluster: cluster, viewModel: input.viewModel, input: input.input, value: input.value,
            key: input.idempotencyKey, reply: reply)
    }

    /// The sender's side: an owner answered a forwarded input (loop `index`).
    func receiveForwardReply(_ payload: [UInt8], cluster: ClusterNode, loop index: Int) {
        guard let (correlation, response) = ForwardedReply.decode(payload),
            let pending = cluster.perLoop[index].value.forwards.removeValue(forKey: correlation)
        else { return }
        pending.timer.cancel()
        pending.reply(response)
    }

    /// Every `streamedCheckInterval`, each loop tries to acquire the sessions it streams but nobody here
    /// runs: one whose owner died (`kill -9`) is taken over when its lease has run out even if no request
    /// comes (a search it was loading completes, the streams see it). While another node holds the lease,
    /// the session's keys get their idle expiry again (in the same script), so a session watched on any
    /// node does not expire (as in single-process mode). Cost per streamed session and loop: one round
    /// trip per interval (`acquire`, or `touch` when this loop runs the session).
    func startOrphanChecks(_ cluster: ClusterNode) {
        for (index, state) in cluster.perLoop.enumerated() {
            let loop = state.loop
            loop.execute { [unowned self] in
                state.value.orphanTimer = loop.scheduleRepeating(every: cluster.streamedCheckInterval) {
                    [unowned self] in
                    for id in state.value.fed.keys { self.checkStreamed(id, cluster: cluster, from: index) }
                }
            }
        }
    }

    private func checkStreamed(_ id: String, cluster: ClusterNode, from index: Int) {
        guard let home = home(of: id) else { return }
        home.loop.runOrExecute { [unowned self] in
            if let owned = cluster.perLoop[home.loop.index].value.owned[id] {
                owned.session.lastActivity = self.now()  // watched here: not idle
                return cluster.stores[home.loop.index].touch(sessionID: id) { _ in }
            }
            // Granted or not, the attempt renews the session's idle expiry.
            self.withOwned(id, cluster: cluster, home: home, reply: { _ in }, onHeld: { _ in }) { _ in }
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
