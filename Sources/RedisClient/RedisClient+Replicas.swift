import EventLoop

/// Replicated commands written in one loop iteration on one connection, and the one `WAIT` after them.
final class WaitBatch {
    var members: [WaitMember] = []
    var replicas = 0
    /// The master's connected replicas when the batch was sealed (nil: not known yet).
    var connected: Int?
    var timeout = 0.0
    /// `WAIT`'s answer (0 when it failed); nil until it came.
    var acks: Int?
}

/// One command of a `WaitBatch`: its reply once it came; `finished` once answered or sent elsewhere.
final class WaitMember {
    let request: RedisClient.Request
    var value: RESPValue?
    var finished = false

    init(_ request: RedisClient.Request) { self.request = request }
}

extension RedisClient {
    /// Sends `args` like `send(_:key:timeout:_:)`, then `WAIT replicas replicaTimeout` on the same
    /// connection, right after it: the reply says how many replicas hold the command. Commands of one loop
    /// iteration to one master share one `WAIT` (it covers every write before it on the connection). With
    /// `separateWaitConnection` (the default) these run on a connection of their own per master, so a
    /// `WAIT` that blocks for its time-out never delays other commands. A redirected command is followed
    /// and waited for where it ran. `replicas` 0: no `WAIT`. The command's `timeout` bounds the command;
    /// the `WAIT` may add `replicaTimeout`. Loop thread only.
    public func send(
        _ args: [RedisArg], key: RedisArg?, timeout: Double? = nil, waitForReplicas replicas: Int,
        replicaTimeout: Double, _ callback: @escaping (Result<RedisReplicated, RedisError>) -> Void
    ) {
        precondition(loop.inEventLoop, "RedisClient.send off its loop")
        route(replicatedRequest(args, slot: key.map(Self.slot(of:)), timeout, nil, replicas, replicaTimeout, callback))
    }

    func replicatedRequest(
        _ args: [RedisArg], slot: Int?, _ timeout: Double?, _ script: RedisScript?, _ replicas: Int,
        _ replicaTimeout: Double, _ callback: @escaping (Result<RedisReplicated, RedisError>) -> Void
    ) -> Request {
        Request(
            args: args, slot: slot, deadline: deadline(timeout), script: script,
            wait: replicas > 0 ? (replicas, max(0.001, replicaTimeout)) : nil
        ) { result, acks in
            callback(
                result.map {
                    RedisReplicated(
                        reply: $0, replicas: acks?.acknowledged ?? 0, wanted: acks?.wanted ?? replicas, asked: replicas)
                })
        }
    }

    func writeReplicated(
        _ request: Request, on connection: RedisConnection, at address: RedisAddress, remaining: Double
    ) {
        let id = ObjectIdentifier(connection)
        let batch: WaitBatch
        if let open = openBatches[id] {
            batch = open
        } else {
            batch = WaitBatch()
            openBatches[id] = batch
            loop.runSoon { [weak self] in self?.seal(batch, id: id, on: connection, at: address) }
        }
        let member = WaitMember(request)
        batch.members.append(member)
        batch.replicas = max(batch.replicas, request.wait?.replicas ?? 0)
        batch.timeout = max(batch.timeout, request.wait?.timeout ?? 0)
        connection.send(request.args, timeout: remaining) { [weak self] result in
            guard let self else { return request.done(result, nil) }
            self.replied(request, result, from: address, on: connection) { value in
                member.value = value
                self.finish(member, of: batch, at: address)
            }
            member.finished = member.finished || member.value == nil  // answered or sent elsewhere
        }
    }

    /// Writes the batch's `WAIT` after its commands; its answer completes every member that has its reply.
    /// It waits for the replicas asked for, or, while the master has fewer connected and strictness is off,
    /// for every replica it has (none, after Redis replaced a dead master by its only replica): a master
    /// short of replicas is slower to survive, never stuck. A master whose replicas are not known yet (one
    /// just promoted, before its first `ROLE` came back) is asked on the same connection first: a `WAIT`
    /// for a replica it does not have would answer only at its time-out.
    private func seal(
        _ batch: WaitBatch, id: ObjectIdentifier, on connection: RedisConnection, at address: RedisAddress
    ) {
        if openBatches[id] === batch { openBatches[id] = nil }
        batch.connected = replicaCounts[address]
        guard batch.connected == nil, !options.replicaAcksStrict else {
            return sendWait(batch, on: connection, at: address)
        }
        readReplicas(of: address, on: connection) { [weak self] in
            guard let self else { return }
            batch.connected = self.replicaCounts[address]
            self.sendWait(batch, on: connection, at: address)
        }
    }

    private func sendWait(_ batch: WaitBatch, on connection: RedisConnection, at address: RedisAddress) {
        let limit = batch.timeout + topology.node.commandTimeout
        connection.stallTimeout = max(connection.stallTimeout ?? 0, limit)
        let milliseconds = max(1, Int((batch.timeout * 1000).rounded()))
        let replicas = wanted(batch.replicas, of: batch)
        connection.send(["WAIT", RedisArg(replicas), RedisArg(milliseconds)], timeout: limit) { [weak self] r in
            batch.acks = (try? r.get().int).flatMap { $0 }.map(Int.init) ?? 0
            for m in batch.members { self?.finish(m, of: batch, at: address) }
        }
    }

    /// The replicas a command asking for `asked` must reach in `batch`: `asked`, or fewer while its master
    /// has fewer connected (not when strict: such a command was refused before it was sent).
    func wanted(_ asked: Int, of batch: WaitBatch) -> Int {
        guard !options.replicaAcksStrict, let connected = batch.connected else { return asked }
        return min(asked, connected)
    }

    private func finish(_ member: WaitMember, of batch: WaitBatch, at address: RedisAddress) {
        guard !member.finished, let value = member.value, let acks = batch.acks else { return }
        member.finished = true
        let asked = member.request.wait?.replicas ?? 0
        let wanted = wanted(asked, of: batch)
        if acks < wanted {
            report(.replicaAckTimeout(master: address, acknowledged: acks, wanted: wanted))
            countReplicas(of: address)  // a replica may be gone: the next commits wait for those left
        }
        if wanted < asked { noteShort(address, wanted: asked) }
        member.request.done(.success(value), ReplicaAcks(acknowledged: acks, wanted: wanted))
    }
}
