import EventLoop
import Logging

/// A pub/sub connection: `SUBSCRIBE`/`PSUBSCRIBE` with a handler per channel or pattern, on its own
/// `RedisConnection` (a connection in subscribe mode cannot run other commands).
///
/// Threading: loop-bound like its connection; handlers run on that loop.
///
/// After a reconnect every channel and pattern is subscribed again and its `onSubscribed` runs
/// again: messages published while the connection was down are lost (pub/sub keeps nothing), so a
/// consumer re-reads what it needs (a session's stream with `XRANGE`) in `onSubscribed`, the order
/// "subscribe first, then read history, then de-duplicate by id".
/// Limitation (hiredis 0.14): subscribing a channel again while its unsubscribe is in flight is not
/// supported (hiredis files the confirmation under the channel name).
// Unchecked: its handlers run from its connection's hiredis callbacks; its fields are loop-thread-only.
public final class RedisSubscriber: @unchecked Sendable {
    /// The underlying connection (its `state` is this subscriber's state).
    public let connection: RedisConnection
    private var stateObservers: [(RedisConnectionState) -> Void] = []

    private struct Subscription {
        var handler: (RedisMessage) -> Void
        var onSubscribed: (() -> Void)?
        var id: UInt?
    }
    private var channels: [String: Subscription] = [:]
    private var patterns: [String: Subscription] = [:]
    /// Channels whose `UNSUBSCRIBE` Redis has not confirmed yet: their messages still reach the handler
    /// they had (Redis delivers what was published before the unsubscribe, then confirms it).
    private var unsubscribing: [String: Draining] = [:]

    private struct Draining {
        var id: UInt
        var handler: (RedisMessage) -> Void
        var onUnsubscribed: [() -> Void]
    }

    /// A subscriber connecting to `configuration` on `loop`; call `start()` on the loop.
    public init(loop: EventLoop, configuration: RedisConfiguration, logger: Logger = Logger(label: "redis.sub")) {
        connection = RedisConnection(loop: loop, configuration: configuration, logger: logger)
        connection.onStateChange = { [weak self] state in
            guard let self else { return }
            for observe in self.stateObservers { observe(state) }
            if state == .ready { self.resubscribeAll() } else { self.completeUnsubscribes() }
        }
    }

    /// Adds an observer of the connection's state, called on the loop (for the several users of one
    /// subscriber: the session feed, the cache). Loop thread only.
    public func addStateObserver(_ observer: @escaping (RedisConnectionState) -> Void) {
        stateObservers.append(observer)
    }

    /// Starts connecting. Loop thread only.
    public func start() { connection.start() }

    /// Closes the connection for good. Loop thread only.
    public func close() {
        channels.removeAll()
        patterns.removeAll()
        connection.close()
        completeUnsubscribes()
    }

    /// Subscribes `handler` to `channel` (replacing an earlier handler). `onSubscribed` runs each
    /// time Redis confirms the subscription (again after every reconnect). Loop thread only.
    public func subscribe(
        channel: String, onSubscribed: (() -> Void)? = nil, _ handler: @escaping (RedisMessage) -> Void
    ) {
        if channels[channel] != nil {
            channels[channel]?.handler = handler
            channels[channel]?.onSubscribed = onSubscribed
            return
        }
        channels[channel] = Subscription(handler: handler, onSubscribed: onSubscribed)
        issue(channel: channel)
    }

    /// Subscribes `handler` to channels matching the glob `pattern`. Loop thread only.
    public func psubscribe(
        pattern: String, onSubscribed: (() -> Void)? = nil, _ handler: @escaping (RedisMessage) -> Void
    ) {
        if patterns[pattern] != nil {
            patterns[pattern]?.handler = handler
            patterns[pattern]?.onSubscribed = onSubscribed
            return
        }
        patterns[pattern] = Subscription(handler: handler, onSubscribed: onSubscribed)
        issue(pattern: pattern)
    }

    /// Stops delivering `channel`. Messages Redis sends before it confirms the unsubscribe (those
    /// published before Redis processed it) still reach the channel's handler; `onUnsubscribed` runs once
    /// Redis has confirmed it, i.e. once no later `PUBLISH` to the channel can reach this subscriber (at
    /// once when the channel was not subscribed on the connection; on a reconnect, when the connection
    /// dropped, which ends every subscription). Loop thread only.
    public func unsubscribe(channel: String, onUnsubscribed: (() -> Void)? = nil) {
        guard let sub = channels.removeValue(forKey: channel) else {
            if let onUnsubscribed {
                if unsubscribing[channel] != nil {
                    unsubscribing[channel]?.onUnsubscribed.append(onUnsubscribed)
                } else {
                    onUnsubscribed()
                }
            }
            return
        }
        guard let id = sub.id, connection.state == .ready else {
            onUnsubscribed?()
            return
        }
        unsubscribing[channel] = Draining(
            id: id, handler: sub.handler, onUnsubscribed: onUnsubscribed.map { [$0] } ?? [])
        connection.sendWithoutReply(["UNSUBSCRIBE", RedisArg(channel)])
    }

    /// Waits until Redis confirms the unsubscribe of `channel` (see `unsubscribe(channel:onUnsubscribed:)`).
    /// Any thread.
    public func unsubscribe(channel: String) async {
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
            connection.loop.runOrExecute { self.unsubscribe(channel: channel) { k.resume() } }
        }
    }

    /// The connection is gone (or made again): nothing is subscribed on it, so every unsubscribe under
    /// way is complete.
    private func completeUnsubscribes() {
        let drained = unsubscribing
        unsubscribing.removeAll()
        for d in drained.values { for done in d.onUnsubscribed { done() } }
    }

    private func resubscribeAll() {
        completeUnsubscribes()
        for channel in channels.keys { issue(channel: channel) }
        for pattern in patterns.keys { issue(pattern: pattern) }
    }

    private func issue(channel: String) {
        guard connection.state == .ready else { return }  // subscribed on `ready`
        channels[channel]?.id = connection.sendPersistent(["SUBSCRIBE", RedisArg(channel)]) { [weak self] r in
            self?.received(r)
        }
    }

    private func issue(pattern: String) {
        guard connection.state == .ready else { return }
        patterns[pattern]?.id = connection.sendPersistent(["PSUBSCRIBE", RedisArg(pattern)]) { [weak self] r in
            self?.received(r)
        }
    }

    private func received(_ result: Result<RESPValue, RedisError>) {
        // Failures mean the connection was lost: everything is subscribed again on `ready`.
        guard case .success(let value) = result, let items = value.array, let kind = items.first?.string else { return }
        switch (kind, items.count) {
        case ("message", 3):
            guard let channel = items[1].string, let payload = items[2].bytes else { return }
            let message = RedisMessage(channel: channel, payload: payload)
            if let sub = channels[channel] {
                sub.handler(message)
            } else {
                unsubscribing[channel]?.handler(message)
            }
        case ("pmessage", 4):
            guard let pattern = items[1].string, let channel = items[2].string, let payload = items[3].bytes else {
                return
            }
            patterns[pattern]?.handler(RedisMessage(channel: channel, pattern: pattern, payload: payload))
        case ("subscribe", 3):
            if let channel = items[1].string { channels[channel]?.onSubscribed?() }
        case ("psubscribe", 3):
            if let pattern = items[1].string { patterns[pattern]?.onSubscribed?() }
        case ("unsubscribe", 3):
            if let channel = items[1].string, let d = unsubscribing.removeValue(forKey: channel) {
                connection.forget(d.id)
                for done in d.onUnsubscribed { done() }
            }
        default: break
        }
    }
}
