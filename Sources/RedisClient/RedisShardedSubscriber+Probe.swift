import EventLoop

extension RedisShardedSubscriber {
    /// Probes every subscription connection that carries channels (one probe at a time each).
    func probeAll() {
        for (address, l) in links where l.connection.state == .ready && !l.channels.isEmpty {
            probe(l, at: address)
        }
    }

    /// Publishes a token on the connection's probe channel through the client (the same master) and
    /// expects it back on the subscription within the command time-out of Redis answering the publish;
    /// else the connection is deaf. Until Redis has answered the publish nothing is judged: a Redis that is
    /// slow to run the publish is slow, not deaf (on a starved Redis subscriptions were called deaf and
    /// made again with every channel, into the same busy Redis).
    func probe(_ l: Link, at address: RedisAddress) {
        guard l.pendingProbe == nil, let channel = probeChannel(of: l, at: address), l.probeConfirmed else { return }
        probeCounter += 1
        let token = "\(probeCounter)"
        let timeout = client.topology.node.commandTimeout
        l.pendingProbe = (token, nil)  // judged once Redis answers the publish (or its time-out: inconclusive)
        client.send(["SPUBLISH", RedisArg(channel), RedisArg(token)], key: RedisArg(channel), timeout: timeout) {
            [weak self, weak l] result in
            guard let self, let l, l.pendingProbe?.token == token else { return }
            let verdict: String?
            switch result {
            case .success(let receivers):
                if receivers.int != 0 {  // on its way back: judged a time-out after Redis published it
                    l.pendingProbe = (
                        token, self.probeTimer(l, at: address, token: token, after: timeout, limit: timeout)
                    )
                    return
                }
                verdict = "the master has no subscriber on the probe channel"
            case .failure(let e):
                // Inconclusive: a publish that failed says nothing of what the subscription hears (the master
                // is being replaced, the slot moved, or the command connection is slow: a time-out here
                // under load called busy subscriptions deaf, and each was made again with all its channels).
                verdict = nil
                if case .server = e { l.probeChannel = nil }
            }
            l.pendingProbe = nil  // no timer yet: it is armed only once a publish reached a subscriber
            if let verdict { self.deaf(l, at: address, verdict) }
        }
    }

    /// The timer that declares the probe `token` lost after `seconds`: the connection is deaf when nothing at
    /// all came on it for `limit` (a connection that keeps delivering other messages is busy, its probe
    /// behind them: checked again once it has been quiet for `limit`).
    private func probeTimer(
        _ l: Link, at address: RedisAddress, token: String, after seconds: Double, limit: Double, graced: Bool = false
    ) -> LoopTimer {
        let due = monotonicNanos() &+ UInt64(seconds * 1e9)
        return loop.schedule(after: seconds) { [weak self, weak l] in
            guard let self, let l, l.pendingProbe?.token == token else { return }
            let now = monotonicNanos()
            let quiet = l.connection.secondsSinceLastReply
            // Unread bytes in the socket: Redis answered while this loop was busy (the probe may be among
            // them). Called deaf, a connection carrying thousands of channels was made again after a stall.
            // A check run long after it was due, or after the loop was starved within the silence, follows a
            // pause (of the host, perhaps with Redis): a grace.
            let again: Double
            var gracedNext = graced  // one grace at most
            if l.connection.hasUnreadReplies {
                again = UnreadReplies.recheckDelay(limit)
            } else if quiet < limit * 0.999 {
                again = limit - quiet
            } else if !graced,
                let grace = UnreadReplies.pauseGrace(
                    late: UnreadReplies.secondsLate(due, now: now),
                    since: UnreadReplies.start(ofQuiet: quiet, now: now), loop: self.loop, limit: limit)
            {
                again = grace
                gracedNext = true
            } else {
                again = 0
            }
            if again > 0 {
                let timer = self.probeTimer(
                    l, at: address, token: token, after: again, limit: limit, graced: gracedNext)
                l.pendingProbe = (token, timer)
                return
            }
            l.pendingProbe = nil
            self.deaf(l, at: address, "probe not back within \(limit) s")
        }
    }

    func probeReturned(_ l: Link, at address: RedisAddress, _ payload: [UInt8]) {
        guard let pending = l.pendingProbe, pending.token == String(decoding: payload, as: UTF8.self) else { return }
        pending.timer?.cancel()
        l.pendingProbe = nil
        if l.deaf != nil {
            l.deaf = nil
            client.report(.subscriptionRecovered(address))
            updateHealth()
        }
    }

    /// Reports the connection deaf and makes it again (every channel on it is subscribed again).
    func deaf(_ l: Link, at address: RedisAddress, _ why: String) {
        l.deaf = why
        client.report(.subscriptionDeaf(address, reason: why))
        client.logger.warning(
            "redis subscription deaf; reconnecting", metadata: ["redis": "\(address)", "why": "\(why)"])
        updateHealth()
        l.connection.reconnect(reason: "deaf: \(why)")
        client.topologyMayHaveChanged("deaf subscription at \(address)")
    }

    /// The connection's probe channel: a sharded channel in a slot `address` serves now (chosen, and
    /// subscribed, when there is none or its slot moved). Nil when no slot of the map is `address`'s.
    func probeChannel(of l: Link, at address: RedisAddress) -> String? {
        if let channel = l.probeChannel, client.master(forSlot: RedisSlot.of(channel)) == address { return channel }
        if let old = l.probeChannel, l.probeConfirmed, l.connection.state == .ready {
            l.connection.send(.sunsubscribe, old) { _ in }
        }
        l.probeChannel = nil
        l.probeConfirmed = false
        guard l.connection.state == .ready else { return nil }
        let prefix = "\(client.options.probeChannelPrefix)\(nonce):\(loop.index):"
        guard
            let channel = (0..<50_000).lazy.map({ "\(prefix){\($0)}" }).first(where: {
                self.client.master(forSlot: RedisSlot.of($0)) == address
            })
        else { return nil }
        l.probeChannel = channel
        l.connection.send(.ssubscribe, channel) { [weak l] result in
            guard let l, l.probeChannel == channel else { return }
            if case .success = result { l.probeConfirmed = true } else { l.probeChannel = nil }
        }
        return channel
    }
}
