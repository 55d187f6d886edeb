import EventLoop

extension RedisShardedSubscriber {
    /// The subscription connection to one master, the channels placed on it, and its probe.
    final class Link {
        let connection: RedisPubSubConnection
        var channels: Set<Key> = []
        /// The probe channel (a slot of this master) and whether Redis confirmed its subscription.
        var probeChannel: String?
        var probeConfirmed = false
        /// The probe under way: its token, and the timer that declares it lost, armed once Redis has answered
        /// its publish (nil until then: a publish not yet answered says nothing of the subscription).
        var pendingProbe: (token: String, timer: LoopTimer?)?
        /// Why the connection was found deaf, until a probe comes back.
        var deaf: String?

        init(_ connection: RedisPubSubConnection) { self.connection = connection }

        func close() {
            pendingProbe?.timer?.cancel()
            pendingProbe = nil
            connection.close()
        }
    }

    /// The master a subscription belongs to now (the slot of its name).
    func target(of key: Key) -> RedisAddress? { client.master(forSlot: RedisSlot.of(key.name)) }

    /// This loop's subscription connection to `address` (made and started if there is none).
    func link(to address: RedisAddress) -> Link {
        if let l = links[address] { return l }
        let c = RedisPubSubConnection(
            loop: loop, configuration: client.topology.configuration(for: address), logger: client.logger)
        let l = Link(c)
        c.onStateChange = { [weak self] state in self?.linkChanged(address, state) }
        c.onMessage = { [weak self] message, sharded in self?.received(message, sharded: sharded, at: address) }
        c.onServerUnsubscribe = { [weak self] channel in self?.serverUnsubscribed(channel, at: address) }
        links[address] = l
        c.start()
        return l
    }

    func topologyChanged() {
        dirty = true
        reconcile()
    }

    /// Places every subscription on the connection of its master (moving those whose master changed)
    /// and writes the commands of those that are not subscribed yet; closes connections nobody needs.
    /// O(subscriptions): for topology changes and the retry tick, not for each new subscription (`place`).
    func reconcile() {
        guard !closed else { return }
        dirty = false
        for sub in subscriptions.values { place(sub) }
        let masters = Set(client.masters)
        for (address, l) in links where l.channels.isEmpty && !masters.contains(address) {
            guard !draining.values.contains(where: { $0.link == address }) else { continue }
            l.close()
            links[address] = nil
        }
        updateHealth()
    }

    /// Puts `sub` on the connection of its master (moving it if its master changed) and writes its command
    /// if it is not subscribed there yet; without a known master it waits for the retry tick (`dirty`).
    func place(_ sub: Subscription) {
        state.value.visited += 1
        let want = target(of: sub.key)
        if sub.link != want {
            if let old = sub.link, let l = links[old] {
                l.channels.remove(sub.key)
                if sub.stage != .pending, l.connection.state == .ready {
                    l.connection.send(sub.key.kind.unsubscribe, sub.key.name) { _ in }
                }
            }
            sub.link = want
            sub.stage = .pending
        }
        guard let at = sub.link else {
            dirty = true  // no master known for its slot yet: try again at the next tick
            return
        }
        let l = link(to: at)
        l.channels.insert(sub.key)
        if sub.stage == .pending, l.connection.state == .ready { issue(sub, on: l, at: at) }
    }

    /// Writes `sub`'s subscribe command; its confirmation runs `onSubscribed`.
    func issue(_ sub: Subscription, on l: Link, at address: RedisAddress) {
        sub.stage = .sent
        l.connection.send(sub.key.kind.subscribe, sub.key.name) { [weak self, weak sub] result in
            guard let self, let sub, self.subscriptions[sub.key] === sub, sub.link == address else { return }
            switch result {
            case .success:
                let again = sub.everConfirmed
                sub.stage = .confirmed
                sub.everConfirmed = true
                if again { self.client.report(.resubscribed(channel: sub.key.name, at: address)) }
                self.updateHealth(soon: true)  // thousands confirm at once after a reconnect
                sub.onSubscribed?()
            case .failure(.server(let message)):
                // `MOVED`: the slot is elsewhere now. Placed again once the map says where.
                sub.stage = .pending
                sub.link = nil
                l.channels.remove(sub.key)
                self.dirty = true
                if case .moved(let slot, let to)? = RedisRedirect(message, from: address) {
                    self.client.report(.moved(slot: slot, to: to))
                    self.client.locator.moved(slot: slot, to: to)
                } else {
                    let now = monotonicNanos()
                    if sub.refusalLoggedAt.map({ now &- $0 > 10_000_000_000 }) ?? true {
                        sub.refusalLoggedAt = now
                        self.client.logger.warning(
                            "redis subscribe failed", metadata: ["channel": "\(sub.key.name)", "error": "\(message)"])
                    }
                    self.client.topologyMayHaveChanged(message)
                }
            case .failure:
                sub.stage = .pending  // the connection dropped: written again when it is ready
            }
        }
    }

    func linkChanged(_ address: RedisAddress, _ state: RedisConnectionState) {
        guard let l = links[address] else { return }
        if state == .ready {
            for key in l.channels {
                guard let sub = subscriptions[key], sub.link == address, sub.stage == .pending else { continue }
                issue(sub, on: l, at: address)
            }
            l.probeChannel = nil
            _ = probeChannel(of: l, at: address)
        } else {
            for key in l.channels { subscriptions[key]?.stage = .pending }
            completeDraining { $0.link == address }
            l.probeConfirmed = false
            l.pendingProbe?.timer?.cancel()
            l.pendingProbe = nil
            if state == .disconnected, !l.channels.isEmpty {
                client.topologyMayHaveChanged("subscription connection to \(address) lost")
            }
        }
        updateHealth()
    }

    func received(_ message: RedisMessage, sharded: Bool, at address: RedisAddress) {
        if sharded, let l = links[address], message.channel == l.probeChannel {
            return probeReturned(l, at: address, message.payload)
        }
        let key =
            message.pattern.map { Key(kind: .pattern, name: $0) }
            ?? Key(kind: sharded ? .sharded : .classic, name: message.channel)
        if let sub = subscriptions[key] { return sub.handler(message) }
        draining[key]?.handler(message)
    }

    /// A `sunsubscribe` the server sent by itself: the channel's slot left this master. The channel is
    /// placed again once the map says where (at once if a `MOVED` says so first).
    func serverUnsubscribed(_ channel: String, at address: RedisAddress) {
        guard let l = links[address] else { return }
        if channel == l.probeChannel {
            l.probeChannel = nil
            l.probeConfirmed = false
            return
        }
        let key = Key(kind: .sharded, name: channel)
        if draining[key]?.link == address {
            let d = draining.removeValue(forKey: key)
            for done in d?.done ?? [] { done() }
        }
        guard let sub = subscriptions[key], sub.link == address else { return }
        sub.stage = .pending
        sub.link = nil
        l.channels.remove(key)
        dirty = true
        client.topologyMayHaveChanged("\(address) unsubscribed \(channel)")
        updateHealth()
    }
}
