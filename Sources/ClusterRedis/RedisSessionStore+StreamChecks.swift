import ClusterStore
import RedisClient

/// Stream checks in batches: every streamed session is checked once per check interval (its streams'
/// deadlines in the cluster-wide set, its keys' idle expiry, who holds its lease: a holder whose liveness
/// key on the session's master is gone holds nothing). One call per session
/// cost Redis a call's overhead (reading the command, the script's set-up, the reply) for each. The checks
/// a loop asks for in one iteration (a slice of its sessions) go to each master as calls of up to
/// `streamCheckBatch` sessions (`renewStreamsMany`), each session answered for itself: far fewer calls,
/// and less of Redis's CPU for idle streamed sessions (docs/BENCHMARKS.md).
/// A batch over several slots of one master that Redis redirects (the slot map was out of date; nothing of
/// it ran) is sent again one slot at a time, as commits and lease renewals are.
extension RedisSessionStore {
    /// The most sessions in one stream-check call.
    static let streamCheckBatch = 128

    /// A check asked for and not yet sent, with its completion.
    struct StreamCheck {
        let sessionID: String
        let members: [String]
        let ttlMilliseconds: Int
        let renewsExpiry: Bool
        let completion: (Result<StreamsCheck, StoreError>) -> Void
    }

    public func checkStreams(
        sessionID: String, members: [String], ttlMilliseconds: Int, renewsExpiry: Bool,
        completion: @escaping (Result<StreamsCheck, StoreError>) -> Void
    ) {
        let check = StreamCheck(
            sessionID: sessionID, members: members, ttlMilliseconds: ttlMilliseconds, renewsExpiry: renewsExpiry,
            completion: completion)
        guard client.loop.inEventLoop else { return checkNow([check], splitOnRedirect: false) }
        guard queue(check, in: pendingStreamChecks) else { return }
        sendAtIterationEnd(
            pendingStreamChecks, key: { [keys] in keys.arg($0.sessionID) },
            batch: Self.streamCheckBatch, send: { [self] in checkNow($0, splitOnRedirect: true) })
    }

    /// One `renewStreamsMany` call for `batch`, each completion with its own answer.
    private func checkNow(_ batch: [StreamCheck], splitOnRedirect: Bool) {
        var args: [RedisArg] = []
        args.reserveCapacity(5 + batch.reduce(0) { $0 + 6 + $1.members.count })
        args.append(RedisArg(limits.expirySeconds))
        args.append(RedisArg(batch.count))
        // Every member of the batch is of this loop: the first names its holder.
        let (tag, streamLive) = streamLiveKey(member: batch[0].members.first ?? "", sessionID: batch[0].sessionID)
        args.append(RedisArg(keys.livePrefix(tag: tag)))
        args.append(RedisArg(streamLive))
        args.append(RedisArg(streamLivenessMilliseconds))
        for c in batch {
            let id = c.sessionID
            args.append(keys.arg(id))
            args.append(keys.arg(id, .events))
            args.append(keys.arg(id, .streams))
            args.append(RedisArg(c.ttlMilliseconds))
            args.append(c.renewsExpiry ? Self.one : Self.zero)
            args.append(RedisArg(c.members.count))
            for m in c.members { args.append(RedisArg(m)) }
        }
        client.evalScript(SessionScripts.renewStreamsMany, keys: [keys.arg(batch[0].sessionID)], args: args) {
            [self] r in
            if splitOnRedirect,
                resentPerSlot(
                    batch, after: r, key: { keys.arg($0.sessionID) },
                    again: { checkNow($0, splitOnRedirect: false) })
            {
                return
            }
            switch r {
            case .failure(let e):
                for c in batch { c.completion(.failure(e.storeError)) }
            case .success(let v):
                guard let answers = v.array, answers.count == batch.count else {
                    for c in batch { c.completion(.failure(.unavailable("unexpected reply: \(v)"))) }
                    return
                }
                for (c, answer) in zip(batch, answers) { c.completion(Self.streamsCheck(answer)) }
            }
        }
    }

    /// One session's answer in a `renewStreamsMany` reply: {holder or nil, seq}, or its `GONE` error.
    static func streamsCheck(_ v: RESPValue) -> Result<StreamsCheck, StoreError> {
        if case .error(let message) = v { return .failure(RedisError.server(message).storeError) }
        guard let a = v.array, a.count == 2 else { return .failure(.unavailable("unexpected reply: \(v)")) }
        let seq = a[1].int.map { UInt64($0) } ?? a[1].string.flatMap { UInt64($0) } ?? 0
        return .success(StreamsCheck(holder: a[0].isNull ? nil : a[0].string, seq: seq))
    }
}
