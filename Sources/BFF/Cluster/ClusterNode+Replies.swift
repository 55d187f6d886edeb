import Dispatch
import EventHTTP
import Primitives
import RedisClient

/// The channels forwarding travels on, per loop (per lease holder): its **input channels**, on which
/// other nodes send it the inputs of the sessions it runs, and its **reply channels**, on which owners
/// answer the inputs it forwarded. Each loop subscribes to one of each kind in a slot of **each master**
/// (`<prefix>:in:{<holder>/<n>}`, `<prefix>:reply:{<holder>/<n>}`, `n` the first whose slot is that
/// master's; one more of each, `n` left out, from the start), and a forwarded input goes on the owner's
/// input channel on its session's master and names the reply channel there. So an input and its answer
/// travel on the session's own shard: while another shard fails over, inputs forwarded to sessions
/// elsewhere are answered as usual (with one reply channel per loop, every forwarded input of that loop
/// waited for its answer in vain while the channel's shard was being replaced — 503 "did not answer",
/// found by `bench/redis-ha.sh`). A failed-over master's slots, channels included, are served by
/// its replica: the channels stay; a new master (a reshard to a new node) gets them when the topology
/// changes.
///
/// The input channels are the holder's, not the session's: a node runs thousands of sessions a loop on a few
/// subscriptions, not one per session (each cost memory on the node, a `SSUBSCRIBE` and a
/// `SUNSUBSCRIBE` per session, and as many to send again after a failover). An input for a session the
/// holder no longer runs is answered `moved`, and its sender asks Redis who runs it now.
///
/// Threading: each loop's lists live in its `ClusterLoopState` (that loop only); `replyChannels` (a copy
/// of every loop's, for tests and logs) any thread.
extension ClusterNode {
    /// Every loop's reply channels (any thread).
    var replyChannels: [String] { replyChannelLists.withLock { $0.flatMap { $0 } } }

    /// Subscribes every loop to its first input and reply channels and, as masters appear, to one of each
    /// on each master (at start).
    func subscribeForwardingChannels() {
        for (index, subscriber) in subscribers.enumerated() {
            let client = clients[index]
            subscriber.loop.execute {
                self.addInputChannel(self.keys.inputs(holder: self.holders[index]), loop: index)
                self.addReplyChannel(self.keys.replies(self.holders[index]), loop: index)
                client.addTopologyObserver { self.channelsPerMaster(loop: index) }
                self.channelsPerMaster(loop: index)
            }
        }
    }

    /// The reply channel for an input forwarded to session `id`: the one on the session's master,
    /// subscribed, else the loop's first (loop `index`).
    func replyChannel(for id: String, loop index: Int) -> String {
        let client = clients[index]
        let subscriber = subscribers[index]
        let channels = perLoop[index].value.replyChannels
        if let master = master(of: id, loop: index),
            let c = channels.first(where: {
                client.master(forSlot: RedisSlot.of($0)) == master && subscriber.isConfirmed(shardChannel: $0)
            })
        {
            return c
        }
        return channels[0]
    }

    /// The input channel of lease holder `holder` on session `id`'s master, as that holder picks it (the
    /// first `n` whose slot the master serves); its first one when the master is not known (loop `index`).
    func inputChannel(holder: String, session id: String, loop index: Int) -> String {
        guard let master = master(of: id, loop: index) else { return keys.inputs(holder: holder) }
        return channel(of: holder, on: master, loop: index, keys.inputs(holder:)) ?? keys.inputs(holder: holder)
    }

    /// The input channel this node takes session `id`'s inputs on, from the loop that would run it (tests;
    /// any thread but that loop's).
    func inputChannel(_ id: String) -> String {
        let index = owner(of: id)?.loop.index ?? 0
        let channel = Lock("")
        let done = DispatchSemaphore(value: 0)
        clients[index].loop.execute {
            channel.withLock { $0 = self.inputChannel(holder: self.holders[index], session: id, loop: index) }
            done.signal()
        }
        done.wait()
        return channel.withLock { $0 }
    }

    /// This loop's input channels (loop `index`; the drain unsubscribes them).
    func inputChannels(loop index: Int) -> [String] { perLoop[index].value.inputChannels }

    private func master(of id: String, loop index: Int) -> RedisAddress? {
        clients[index].master(forSlot: RedisClient.slot(of: RedisArg(keys.session(id))))
    }

    /// `name(holder + "/n")` for the first `n` whose slot `master` serves, as loop `index` knows the slots.
    private func channel(of holder: String, on master: RedisAddress, loop index: Int, _ name: (String) -> String)
        -> String?
    {
        let client = clients[index]
        for n in 0..<50_000 {
            let channel = name("\(holder)/\(n)")
            if client.master(forSlot: RedisSlot.of(channel)) == master { return channel }
        }
        return nil
    }

    /// Makes sure loop `index` has an input and a reply channel on each master it knows (loop `index`).
    private func channelsPerMaster(loop index: Int) {
        let client = clients[index]
        let holder = holders[index]
        let state = perLoop[index]
        // Inputs: the first `n` of each master, which is where senders look (the bare first channel is only
        // for a sender that does not know the session's master). Replies: any subscribed one will do.
        let withInputs = Set(
            state.value.inputChannels.dropFirst().compactMap { client.master(forSlot: RedisSlot.of($0)) })
        let withReplies = Set(state.value.replyChannels.compactMap { client.master(forSlot: RedisSlot.of($0)) })
        for master in client.masters {
            if !withInputs.contains(master), let c = channel(of: holder, on: master, loop: index, keys.inputs(holder:))
            {
                addInputChannel(c, loop: index)
            }
            if !withReplies.contains(master), let c = channel(of: holder, on: master, loop: index, keys.replies) {
                addReplyChannel(c, loop: index)
            }
        }
    }

    private func addInputChannel(_ channel: String, loop index: Int) {
        guard !perLoop[index].value.inputChannels.contains(channel) else { return }
        perLoop[index].value.inputChannels.append(channel)
        let owner = loopSessions[index]
        subscribers[index].ssubscribe(channel: channel) { [weak self, weak owner] message in
            guard let self, let owner else { return }
            self.receiveForwarded(message.payload, owner: owner)
        }
    }

    private func addReplyChannel(_ channel: String, loop index: Int) {
        guard !perLoop[index].value.replyChannels.contains(channel) else { return }
        perLoop[index].value.replyChannels.append(channel)
        replyChannelLists.withLock { $0[index].append(channel) }
        subscribers[index].ssubscribe(channel: channel) { message in
            self.receiveForwardReply(message.payload, loop: index)
        }
    }
}
