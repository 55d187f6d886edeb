import EventHTTP
import RedisClient

/// Where owners answer forwarded inputs: each loop subscribes to one sharded reply channel in a slot of
/// **each master** (`<prefix>:reply:{<holder>/<n>}`, `n` chosen so that the slot is that master's; one
/// more, `<prefix>:reply:{<holder>}`, from the start), and a forwarded input names the one on its
/// session's master. So an input and its answer travel on the session's own shard: while another shard
/// fails over, inputs forwarded to sessions elsewhere are answered as usual (with one reply channel per
/// loop, every forwarded input of that loop waited for its answer in vain while the channel's shard was
/// being replaced — 503 "did not answer", found by `scripts/bench-redis-ha.sh`). A failed-over master's
/// slots, reply channel included, are served by its replica: the channel stays; a new master (a
/// reshard to a new node) gets one when the topology changes.
///
/// Threading: each loop's list lives in its `ClusterLoopState` (that loop only); `replyChannels` (a copy
/// of every loop's, for tests and logs) any thread.
extension ClusterNode {
    /// Every loop's reply channels (any thread).
    var replyChannels: [String] { replyChannelLists.withLock { $0.flatMap { $0 } } }

    /// Subscribes every loop to its first reply channel and, as masters appear, to one on each (at start).
    func subscribeForwardReplies() {
        for (index, subscriber) in subscribers.enumerated() {
            let client = clients[index]
            subscriber.loop.execute {
                self.addReplyChannel(self.keys.replies(self.holders[index]), loop: index)
                client.addTopologyObserver { self.replyChannelPerMaster(loop: index) }
                self.replyChannelPerMaster(loop: index)
            }
        }
    }

    /// The reply channel for an input forwarded to session `id`: the one on the session's master,
    /// subscribed, else the loop's first (loop `index`).
    func replyChannel(for id: String, loop index: Int) -> String {
        let client = clients[index]
        let subscriber = subscribers[index]
        let channels = perLoop[index].value.replyChannels
        if let master = client.master(forSlot: RedisClient.slot(of: RedisArg(keys.session(id)))),
            let c = channels.first(where: {
                client.master(forSlot: RedisSlot.of($0)) == master && subscriber.isConfirmed(shardChannel: $0)
            })
        {
            return c
        }
        return channels[0]
    }

    /// Makes sure loop `index` has a reply channel on each master it knows (loop `index`).
    private func replyChannelPerMaster(loop index: Int) {
        let client = clients[index]
        var taken = Set(perLoop[index].value.replyChannels.compactMap { client.master(forSlot: RedisSlot.of($0)) })
        for master in client.masters where !taken.contains(master) {
            let base = holders[index]
            guard
                let channel = (0..<50_000).lazy.map({ self.keys.replies("\(base)/\($0)") }).first(where: {
                    client.master(forSlot: RedisSlot.of($0)) == master
                })
            else { continue }
            taken.insert(master)
            addReplyChannel(channel, loop: index)
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
