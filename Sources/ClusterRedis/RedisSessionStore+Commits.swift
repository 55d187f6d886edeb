import ClusterStore
import EventLoop
import Primitives
import RedisClient

/// Group commit: the commits of one loop iteration go to Redis as one script call (`commitMany`) per master,
/// and while a master has a batch of this loop's in flight, the commits that come meanwhile wait for its
/// answer and then go together. Redis's cost per call (reading the command, the script's set-up, writing
/// the reply: more than a commit's own work) is then shared by every commit of the
/// batch, and this node's by every input; at a low rate a commit goes out at the end of the iteration it
/// was asked in (nothing waits for a timer), at a high rate the batches grow by themselves.
///
/// Commit window (`--redis-commit-window`, off by default): at a rate where one node's commits do not
/// overlap (each answered before the next is asked for) the batches above hold one commit
/// each, and every commit pays Redis's cost per call. With a window, when this loop asked its previous
/// commit of the same master less than a window ago (it commits there faster than one per window), a commit
/// that would go alone waits up to one window for others, and they go together: it buys Redis CPU (and
/// this node's) with latency, and only while the loop is busy; what it saved and the input latency it
/// added are in docs/BENCHMARKS.md (more latency than the window itself: libevent's timers have
/// millisecond steps and an idle vCPU wakes late).
/// A commit after a quiet spell goes at once, as before; a full batch (`commitBatch`) goes at once; an
/// acquisition, release or deletion of a session sends its master's held commits first
/// (`sendCommitsBefore`).
///
/// Each commit is fenced and answered for itself (a refused one leaves the others as they are); a batch that
/// fails as a whole (time-out, connection lost, not replicated) fails each of its commits the same way, as
/// pipelined commits on one connection would. Commits of one session keep their order: one loop, one queue
/// per master, one connection to it, answers in order.
extension RedisSessionStore {
    /// The most commits in one call.
    static let commitBatch = 64
    /// The most bytes of state and events in one call (a batch holds at least one commit).
    static let commitBatchBytes = 512 * 1024
    /// The most calls of this loop's waiting commits sent to one master at once; the rest wait until
    /// they are answered. A burst (every session of a loop reacting to one upstream block) went out as
    /// hundreds of calls at once and, with the other work on the connection, past its bound
    /// (`maxInFlight`): the calls beyond were refused and their sessions left the node ("commit failed").
    /// 16 calls hold up to 1,024 commits per round trip.
    static let commitCallsAtOnce = 16
    /// How soon waiting commits are tried again when their connection was full (its `maxInFlight`
    /// outstanding): they wait, in order, instead of being refused.
    static let fullConnectionRetry = 0.005
    /// The commit script's flags and empty channel, made once (a literal is a new array each time).
    static let one: RedisArg = "1", zero: RedisArg = "0", empty: RedisArg = ""
    /// A commit's key flags (`SessionScripts.commitMany`): no key, a key; the same with the keys looked at
    /// first (a Redis Cluster, whose slots move).
    static let keyFlags: [RedisArg] = ["0", "1", "2", "3"]

    /// With `replicaAcks` > 0 the script publishes nothing: once the replicas confirmed the batch, each
    /// commit's events are published here (`SPUBLISH`, in commit order: commits of one session go out on one
    /// connection and are confirmed in order), before its completion runs (which may show them to this
    /// node's own streams). A commit they did not confirm is never published (`.notReplicated`). Loop only.
    public func commit(_ commit: SessionCommit, completion: @escaping (Result<CommitResult, StoreError>) -> Void) {
        if let e = limits.check(commit) { return completion(.failure(e)) }
        precondition(client.loop.inEventLoop, "RedisSessionStore.commit off its loop")
        let master = client.masterName(serving: keys.arg(commit.lease.sessionID))
        commitQueue.value.waiting[master, default: []].append(PendingCommit(commit: commit, completion: completion))
        if commitWindowNanos > 0 {
            let now = monotonicNanos()
            let previous = commitQueue.value.lastAsked.updateValue(now, forKey: master)
            let waiting = commitQueue.value.waiting[master]?.count ?? 0
            if waiting == 1, commitQueue.value.inFlight[master] == nil, let previous,
                now &- previous < commitWindowNanos
            {
                return hold(master)
            }
            if waiting < Self.commitBatch, commitQueue.value.held.contains(master) { return }
            commitQueue.value.held.remove(master)
        }
        scheduleCommits()
    }

    /// Keeps `master`'s waiting commits for one commit window (the window's timer sends every held master's).
    private func hold(_ master: String) {
        commitQueue.value.held.insert(master)
        guard commitQueue.value.window == nil else { return }
        commitQueue.value.window = client.loop.schedule(after: Double(commitWindowNanos) / 1e9) { [self] in
            commitQueue.value.window = nil
            commitQueue.value.held.removeAll()
            sendWaiting()
        }
    }

    /// Commits waiting for the master of `key`'s slot to answer this loop's batch in flight: work asked for
    /// and not yet on the connection, which admission control counts with the commands in flight there
    /// (a stalled master would otherwise see one batch in flight and a queue growing behind it). Loop only.
    public func commitsWaiting(key: String) -> Int {
        commitQueue.value.waiting[client.masterName(serving: RedisArg(key))]?.count ?? 0
    }

    /// Sends now, whatever is in flight, the commits waiting for the master of session `id`: called before
    /// any other write of a session (an acquisition, a release, a deletion), which goes out on the same
    /// connection right after and must reach Redis after every commit asked for before it. Without this a
    /// release could overtake a commit waiting for its batch, and an acquisition by the same loop (its
    /// snapshot) could miss one; commits are fenced, so nothing would be applied twice, but an input
    /// acknowledged by a late commit could be missing from the state its session was restored from.
    func sendCommitsBefore(sessionID id: String) {
        guard client.loop.inEventLoop else { return }
        let master = client.masterName(serving: keys.arg(id))
        commitQueue.value.held.remove(master)
        guard let batch = commitQueue.value.waiting.removeValue(forKey: master) else { return }
        sendInBatches(batch, master: master)
    }

    /// Sends the waiting commits of every master with no batch in flight and none held for the commit
    /// window, at the end of this loop iteration.
    private func scheduleCommits() {
        guard !commitQueue.value.scheduled else { return }
        commitQueue.value.scheduled = true
        client.loop.runSoon { [self] in
            commitQueue.value.scheduled = false
            sendWaiting()
        }
    }

    /// Sends the waiting commits of every master with no call of this loop in flight and none held for the
    /// window: at most `commitCallsAtOnce` calls, and only while the connection has room; the rest stay
    /// waiting, in order, for those answers (or the retry `hasRoom` arms).
    private func sendWaiting() {
        for master in commitQueue.value.waiting.keys
        where commitQueue.value.inFlight[master] == nil && !commitQueue.value.held.contains(master) {
            let waiting = commitQueue.value.waiting.removeValue(forKey: master) ?? []
            let rest = sendInBatches(waiting, master: master, calls: Self.commitCallsAtOnce, onlyWithRoom: true)
            if !rest.isEmpty { commitQueue.value.waiting[master] = rest }  // sent once these are answered
        }
    }

    /// True when the connection to the master of `key` can take one more command now (fewer than its
    /// `maxInFlight` outstanding); else a retry of the waiting commits is armed.
    private func hasRoom(for key: @autoclosure () -> RedisArg) -> Bool {
        if client.commandsInFlight(key: key()) < client.topology.node.maxInFlight { return true }
        if commitQueue.value.retry == nil {
            commitQueue.value.retry = client.loop.schedule(after: Self.fullConnectionRetry) { [self] in
                commitQueue.value.retry = nil
                sendWaiting()
            }
        }
        return false
    }

    /// `batch` in calls of at most `commitBatch` commits and `commitBatchBytes` bytes, in order, at most
    /// `calls` of them, and with `onlyWithRoom` only while the connection has room (`hasRoom`); returns
    /// what did not go (empty when all went). The barrier before a session's other writes
    /// (`sendCommitsBefore`) sends everything: nothing may stay behind the write that follows.
    @discardableResult
    private func sendInBatches(
        _ batch: [PendingCommit], master: String, calls: Int = .max, onlyWithRoom: Bool = false
    ) -> [PendingCommit] {
        var start = 0
        var sent = 0
        while start < batch.count {
            guard sent < calls,
                !onlyWithRoom || hasRoom(for: keys.arg(batch[start].commit.lease.sessionID))
            else { return Array(batch[start...]) }
            sent += 1
            var end = start + 1
            var bytes = batch[start].commit.byteCount
            while end < batch.count, end - start < Self.commitBatch,
                bytes + batch[end].commit.byteCount <= Self.commitBatchBytes
            {
                bytes += batch[end].commit.byteCount
                end += 1
            }
            send(Array(batch[start..<end]), master: master, splitOnRedirect: true)
            start = end
        }
        return []
    }

    /// One `commitMany` call for `batch`; when it is answered, the commits that waited for it are sent.
    /// A batch over several slots that Redis redirects (the slot map was out of date; nothing of it ran)
    /// is sent again one slot at a time.
    private func send(_ batch: [PendingCommit], master: String, splitOnRedirect: Bool) {
        commitQueue.value.inFlight[master, default: 0] += 1
        var args: [RedisArg] = []  // one allocation of the final size
        args.reserveCapacity(commitHeader.count + 1 + batch.reduce(0) { $0 + 10 + $1.commit.events.count })
        args += commitHeader
        args.append(RedisArg(batch.count))
        var keyArgs: [RedisArg] = []
        for item in batch {
            let c = item.commit
            let id = c.lease.sessionID
            let session = keys.arg(id)
            if keyArgs.isEmpty { keyArgs = [session] }
            args += [
                session, keys.arg(id, .events), keys.arg(id, .idempotency, c.idempotencyKey ?? ""),
                RedisArg(Int(c.lease.token)), RedisArg(bytes: c.state), c.isInput ? Self.one : Self.zero,
                Self.keyFlags[(c.isInput && c.idempotencyKey != nil ? 1 : 0) + (client.isSharded ? 2 : 0)],
                replicaAcks > 0 ? Self.empty : keys.arg(id, .channel), c.renewsExpiry ? Self.one : Self.zero,
                RedisArg(c.events.count),
            ]
            for event in c.events { args.append(RedisArg(bytes: event)) }
        }
        replicated(SessionScripts.commitMany, keys: keyArgs, args: args) { [self] r, redirected in
            commitQueue.value.inFlight[master, default: 1] -= 1
            if commitQueue.value.inFlight[master] == 0 { commitQueue.value.inFlight[master] = nil }
            if commitQueue.value.waiting[master] != nil { scheduleCommits() }
            if splitOnRedirect,
                resentPerSlot(
                    batch, redirected: redirected, key: { keys.arg($0.commit.lease.sessionID) },
                    again: { send($0, master: master, splitOnRedirect: false) })
            {
                return
            }
            answer(batch, r)
        }
    }

    /// Each commit's completion with its own answer (or the batch's failure), after publishing its events
    /// when this store publishes them itself (replica acks).
    private func answer(_ batch: [PendingCommit], _ r: Result<RESPValue, StoreError>) {
        let answers: [RESPValue]
        switch r {
        case .failure(let e):
            for item in batch { item.completion(.failure(e)) }
            return
        case .success(let v):
            guard let a = v.array, a.count == batch.count else {
                for item in batch { item.completion(.failure(.unavailable("unexpected reply: \(v)"))) }
                return
            }
            answers = a
        }
        for (item, reply) in zip(batch, answers) {
            let result = Self.commitResult(reply)
            if replicaAcks > 0, case .success(let c) = result {
                let channel = keys.channel(item.commit.lease.sessionID)
                for (eventID, bytes) in zip(c.eventIDs, item.commit.events) {
                    let message = RedisSessionEventFeed.encode(StoredEvent(id: eventID, payload: bytes))
                    client.send(["SPUBLISH", RedisArg(channel), RedisArg(bytes: message)], key: RedisArg(channel)) {
                        _ in
                    }
                }
            }
            item.completion(result)
        }
    }

    /// One commit's answer in a `commitMany` reply: {inputSeq or -1, {ids}}, or its `GONE`/`FENCED` error.
    static func commitResult(_ v: RESPValue) -> Result<CommitResult, StoreError> {
        if case .error(let message) = v { return .failure(RedisError.server(message).storeError) }
        guard let a = v.array, a.count == 2, let input = a[0].int, let ids = a[1].array else {
            return .failure(.unavailable("unexpected reply: \(v)"))
        }
        let eventIDs = ids.compactMap { $0.string.flatMap { UInt64($0) } }
        guard eventIDs.count == ids.count else { return .failure(.unavailable("unexpected reply: \(v)")) }
        return .success(CommitResult(eventIDs: eventIDs, inputSeq: input < 0 ? nil : UInt64(input)))
    }
}

/// A commit waiting for its batch, with its completion.
struct PendingCommit {
    let commit: SessionCommit
    let completion: (Result<CommitResult, StoreError>) -> Void
}

/// What `RedisSessionStore.commit` keeps per master: the commits not sent yet, the batches in flight,
/// whether a send is scheduled for the end of this loop iteration, and for the commit window: when the
/// loop last asked for a commit of each master, the masters whose commits are held, and the window's timer.
struct CommitQueue {
    var waiting: [String: [PendingCommit]] = [:]
    var inFlight: [String: Int] = [:]
    var scheduled = false
    var lastAsked: [String: UInt64] = [:]
    var held: Set<String> = []
    var window: LoopTimer?
    /// Armed while commits wait for room on a full connection (`hasRoom`).
    var retry: LoopTimer?
}

extension SessionCommit {
    /// The bytes of state and events this commit sends.
    var byteCount: Int { events.reduce(state.count) { $0 + $1.count } }
}
