import ClusterRedis
import ClusterStore
import EventLoop
import Foundation
import RedisClient
import RedisTestSupport
import Synchronization
import XCTest

final class RedisSessionStoreTests: XCTestCase {
    var server: RedisServerProcess!
    var loop: EventLoop!
    var connection: RedisClient!
    var subscriber: RedisShardedSubscriber!
    let keys = ClusterKeys(prefix: "t")

    override func setUp() async throws {
        server = try RedisServerProcess()
        loop = startedLoop()
        (connection, subscriber) = await startedClient(server.url, on: loop)
        XCTAssertTrue(connection.isReady)
    }

    override func tearDown() async throws {
        await close(connection, subscriber)
        loop.stop()
        server.kill()
    }

    /// Lua: deletes the liveness key (prefix ARGV[1]) of the holder named by session KEYS[1]'s lease.
    static let dropHolderLiveness = """
        local v = redis.call('HGET', KEYS[1], 'lease')
        if v then redis.call('DEL', ARGV[1] .. string.sub(v, 1, string.find(v, '|[^|]*$') - 1)) end
        return 1
        """

    func harness(
        history: Int = 256, commitWindow: Double = 0, onLivenessLapsed: @escaping @Sendable (String) -> Void = { _ in }
    ) -> SessionStoreHarness {
        let store = RedisSessionStore(
            client: connection, limits: SessionStoreLimits(historyEvents: history), keys: keys,
            commitWindow: commitWindow, onLivenessLapsed: onLivenessLapsed)
        let connection = self.connection!
        let keys = self.keys
        let h = SessionStoreHarness(loop: loop, store: store) { id in
            // What the TTL does: the liveness key of the lease's holder lapses.
            _ = await connection.send([
                "EVAL", RedisArg(Self.dropHolderLiveness), "1", RedisArg(keys.session(id)),
                RedisArg(keys.livePrefix(tag: ClusterKeys.unshardedLiveTag)),
            ])
        }
        h.passStreamDeadlines = { id in
            // Every score (deadline, Redis ms) becomes 0: long past.
            let key = RedisArg(keys.streams(id))
            _ = await connection.send(["ZUNIONSTORE", key, "1", key, "WEIGHTS", "0"])
        }
        return h
    }

    func testCreateCommitReplay() async throws { try await SessionStoreContract.createCommitReplay(harness()) }
    func testLeaseFencingAndTakeover() async throws {
        try await SessionStoreContract.leaseFencingAndTakeover(harness())
    }

    func testStreamLimit() async throws { try await SessionStoreContract.streamLimit(harness()) }

    /// Deadlines are on Redis's clock, in milliseconds: a stream admitted for 400 ms counts until then
    /// (a second one is refused) and stops counting by itself afterwards (one is admitted).
    func testAStreamStopsCountingAtItsDeadlineOnRedisTime() async throws {
        let h = harness()
        _ = try await h.create("d", "n").get()
        let admit: @Sendable (String) async -> Result<Bool, StoreError> = { member in
            await h.call { s, done in
                s.admitStream(sessionID: "d", member: member, limit: 1, ttlMilliseconds: 400, completion: done)
            }
        }
        let started = Date()
        let first = await admit("dead/1")
        XCTAssertEqual(first, .success(true))
        let second = await admit("b/1")
        XCTAssertEqual(second, .success(false), "within its deadline the first one counts")
        let deadline = Date().addingTimeInterval(10)
        while try await admit("b/1").get() == false {
            if Date() > deadline { return XCTFail("the deadline never passed") }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let waited = Date().timeIntervalSince(started)
        XCTAssertGreaterThanOrEqual(waited, 0.35, "counted until its deadline (\(waited) s)")
        let third = await admit("c/1")
        XCTAssertEqual(third, .success(false), "the new one counts")
    }

    func testHistoryIsBounded() async throws {
        try await SessionStoreContract.historyIsBounded(harness(history: 10), history: 10)
        let h = harness(history: 10)
        let lease = try await h.create("long", "n").get()
        for i in 0..<1000 { _ = try await h.commit(lease, ["e\(i)"], state: "s").get() }
        let n = try await connection.send(["XLEN", RedisArg(keys.events("long"))]).get().int ?? 0
        // `MAXLEN ~ 10`: whole stream nodes are dropped (at most 100 entries each, Redis's default).
        XCTAssertTrue((10...110).contains(n), "at least the last 10 events, at most a node more: \(n)")
    }

    func testEveryKeyHasAnExpiry() async throws {
        let h = harness()
        let lease = try await h.create("x", "n").get()
        _ = try await h.commit(lease, ["e"], state: "s", input: true, key: "k").get()
        let admitted = try await h.admitStream("x", "n/1", limit: 4).get()
        XCTAssertTrue(admitted)
        let all = try await connection.send(["KEYS", "t:*"]).get().array ?? []
        XCTAssertEqual(
            all.count, 6,
            "session (with its lease), events, idempotency key, streams, liveness, stream liveness: \(all)")
        for key in all {
            let ttl = try await connection.send(["PTTL", RedisArg(bytes: key.bytes ?? [])]).get().int ?? -1
            XCTAssertGreaterThan(ttl, 0, "\(key.string ?? "") must expire")
            XCTAssertLessThanOrEqual(ttl, 1860 * 1000, "the idle time-out plus the renewal interval at most")
        }
        _ = try await h.renewStreams("x", ["n/1"]).get()
        let renewedTTL = try await connection.send(["PTTL", RedisArg(keys.streams("x"))]).get().int ?? -1
        XCTAssertGreaterThan(renewedTTL, 0, "the renewal keeps the expiry")
        let deleted = await h.delete(lease)
        XCTAssertTrue(deleted)
        let left = try await connection.send(["KEYS", "t:*"]).get().array ?? []
        XCTAssertEqual(
            left.map { $0.string ?? "" }.sorted(),
            [
                keys.idempotency("x", "k"), keys.live(holder: "n", tag: ClusterKeys.unshardedLiveTag),
                keys.streamLive(holder: "n", tag: ClusterKeys.unshardedLiveTag),
            ].sorted(),
            "delete removes the streams too; the holder's (stream) liveness keys are the holder's, not the session's")
    }

    /// A periodic check that does not renew the expiry leaves the session's and its history's TTL as they
    /// are (the node renews once per renewal interval) but still renews its members; a set of streams the
    /// check makes anew (every member had expired) gets an expiry all the same. Opening a stream
    /// (`admitStream`) renews the session's expiry: a stream keeps its session alive from its first moment.
    func testOnlyARenewingStreamCheckTouchesTheSessionsExpiry() async throws {
        let h = harness()
        let lease = try await h.create("q", "n").get()
        _ = try await h.commit(lease, ["e"], state: "s", input: true).get()
        _ = try await h.admitStream("q", "n/1", limit: 4).get()
        func ttl(_ key: String) async throws -> Int64 {
            try await connection.send(["PTTL", RedisArg(key)]).get().int ?? -3
        }
        for key in [keys.session("q"), keys.events("q")] {
            _ = try await connection.send(["PEXPIRE", RedisArg(key), "100000"]).get()
        }
        let quiet = await h.checkStreamsTogether(["q"], members: ["n/1", "n/2"], renewsExpiry: false)
        XCTAssertEqual(try quiet[0].get().holder, "n")
        for key in [keys.session("q"), keys.events("q")] {
            let left = try await ttl(key)
            XCTAssertLessThanOrEqual(left, 100_000, "\(key): not renewed")
            XCTAssertGreaterThan(left, 0)
        }
        let members = try await connection.send(["ZRANGE", RedisArg(keys.streams("q")), "0", "-1"]).get()
        XCTAssertEqual(members.array?.compactMap(\.string), ["n/1", "n/2"])

        _ = try await connection.send(["DEL", RedisArg(keys.streams("q"))]).get()
        _ = await h.checkStreamsTogether(["q"], members: ["n/3"], renewsExpiry: false)
        let remade = try await ttl(keys.streams("q"))
        XCTAssertGreaterThan(remade, 0, "a set made anew has an expiry")

        _ = await h.checkStreamsTogether(["q"], members: ["n/3"], renewsExpiry: true)
        for key in [keys.session("q"), keys.events("q")] {
            let renewed = try await ttl(key)
            XCTAssertGreaterThan(renewed, 100_000, "\(key): renewed")
        }

        _ = try await connection.send(["PEXPIRE", RedisArg(keys.session("q")), "100000"]).get()
        _ = try await h.admitStream("q", "n/4", limit: 4).get()
        let afterOpening = try await ttl(keys.session("q"))
        XCTAssertGreaterThan(afterOpening, 100_000, "an opened stream renews the session's expiry")
    }

    func testCommitPublishesTheSameEventItAppends() async throws {
        let h = harness()
        let lease = try await h.create("p", "n").get()
        let feed = RedisSessionEventFeed(subscriber: subscriber, keys: keys)
        let (stream, out) = AsyncStream<StoredEvent?>.makeStream()
        var seen = stream.makeAsyncIterator()
        loop.execute {
            feed.subscribe(sessionID: "p", onSubscribed: { out.yield(nil) }) { out.yield($0) }
        }
        let subscribed = await seen.next()
        XCTAssertEqual(subscribed, .some(nil))
        let c = try await h.commit(lease, ["one", "two"], state: "s").get()
        let live1 = await seen.next()
        let live2 = await seen.next()
        XCTAssertEqual(live1, StoredEvent(id: c.eventIDs[0], payload: Array("one".utf8)))
        XCTAssertEqual(live2, StoredEvent(id: c.eventIDs[1], payload: Array("two".utf8)))
        let fromFirst = try await h.replay("p", after: c.eventIDs[0]).get()
        XCTAssertEqual(fromFirst, .events([live2!!]))
    }

    func testUnreachableRedisIsUnavailable() async throws {
        let h = harness()
        server.kill()
        let client = connection!
        _ = await eventually { !client.isReady }
        let r = await h.load("x")
        guard case .failure(.unavailable) = r else { return XCTFail("\(r)") }
    }

    func testCommitCost() async throws {
        let h = harness()
        let lease = try await h.create("bench", "n").get()
        let state = String(repeating: "x", count: 2000)
        let n = 2000
        let started = Date()
        for i in 0..<n {
            _ = try await h.commit(lease, ["{\"event\":\(i)}"], state: state, input: true, key: "k\(i)").get()
        }
        let elapsed = Date().timeIntervalSince(started)
        let stats = try await connection.send(["INFO", "commandstats"]).get().string ?? ""
        let line = stats.split(separator: "\r\n").first { $0.hasPrefix("cmdstat_evalsha:") } ?? ""
        print(
            "commit (1 event, 2 KB state, idempotency key): \(elapsed / Double(n) * 1e6) µs per call from a task; "
                + "redis \(line)")
    }

    /// Stream checks asked for in one loop iteration are one `EVALSHA` (`renewStreamsMany`), each answered
    /// for itself: the lease's holder (or none) and the session's seq; a session that is gone answers `GONE`
    /// without failing the others; each checked session's members get their deadline and its keys the idle
    /// expiry. 300 checks are 3 calls (128 a call).
    func testStreamChecksOfOneLoopIterationAreOneRoundTripEachAnsweredForItself() async throws {
        let h = harness()
        let a = try await h.create("k1", "node-a").get()
        let b = try await h.create("k2", "node-b").get()
        let committed = try await h.commit(a, ["e1", "e2"], state: "s", input: true).get()
        let seq = try XCTUnwrap(committed.eventIDs.last)
        _ = try await h.release(b).get()  // k2: no lease
        _ = await h.checkStreamsTogether(["k1"], members: ["warm-up"])  // the script loaded
        for id in ["k1", "k2"] {
            _ = try await connection.send(["EXPIRE", RedisArg(keys.session(id)), RedisArg(100)]).get()
        }
        let before = try await evalCalls()
        let answers = await h.checkStreamsTogether(["k1", "k2", "k-gone"], members: ["n/1", "n/2"])
        let after = try await evalCalls()
        XCTAssertEqual(after - before, 1, "three checks, one round trip")
        XCTAssertEqual(try answers[0].get(), StreamsCheck(holder: "node-a", seq: seq))
        XCTAssertEqual(try answers[1].get(), StreamsCheck(holder: nil, seq: 0))
        guard case .failure(let gone) = answers[2] else { return XCTFail("\(answers[2])") }
        XCTAssertEqual(gone, .gone)
        for id in ["k1", "k2"] {
            let ttl = try await connection.send(["TTL", RedisArg(keys.session(id))]).get().int ?? 0
            XCTAssertGreaterThan(ttl, 100, "\(id): the idle expiry renewed")
            let members = try await connection.send(["ZRANGE", RedisArg(keys.streams(id)), "0", "-1"]).get()
            XCTAssertEqual(
                members.array?.compactMap(\.string).sorted(), id == "k1" ? ["n/1", "n/2", "warm-up"] : ["n/1", "n/2"])
        }
        let many = try await evalCalls()
        let checks = await h.checkStreamsTogether(Array(repeating: "k1", count: 300), members: ["n/1"])
        let afterMany = try await evalCalls()
        XCTAssertEqual(afterMany - many, 3, "128 checks a call")
        XCTAssertEqual(checks.filter { (try? $0.get()) == StreamsCheck(holder: "node-a", seq: seq) }.count, 300)
    }

    /// A call of stream checks looks each holder's liveness key up once, however many of its sessions it
    /// checks, and drops the expired members of a set of streams only when it renews the expiry (once a
    /// minute, not every 10 s); the admission, which counts the set, still drops them first. Before,
    /// each was one command per session per check.
    func testStreamChecksLookEachHolderUpOnceAndDropExpiredMembersOnlyWhenTheyRenew() async throws {
        let h = harness()
        let ids = (0..<6).map { "p\($0)" }
        for id in ids { _ = try await h.create(id, id == "p5" ? "node-b" : "node-a").get() }
        _ = await h.checkStreamsTogether(["p0"], members: ["warm-up"])  // the script loaded
        // A stream of a node that died: its deadline long past.
        _ = try await connection.send(["ZADD", RedisArg(keys.streams("p0")), "1", "dead/1"]).get()
        let (exists, prunes) = (try await calls("exists"), try await calls("zremrangebyscore"))
        let answers = await h.checkStreamsTogether(ids, members: ["n/1"], renewsExpiry: false)
        XCTAssertEqual(
            answers.map { try? $0.get().holder }, ["node-a", "node-a", "node-a", "node-a", "node-a", "node-b"])
        let existsAfter = try await calls("exists")
        XCTAssertEqual(existsAfter - exists, 2, "six sessions of two holders: two liveness keys looked at")
        let prunesAfter = try await calls("zremrangebyscore")
        XCTAssertEqual(prunesAfter - prunes, 0, "a check that does not renew drops nothing")
        let kept = try await connection.send(["ZRANGE", RedisArg(keys.streams("p0")), "0", "-1"]).get()
        XCTAssertEqual(kept.array?.compactMap(\.string).sorted(), ["dead/1", "n/1", "warm-up"])

        let admitted = try await h.admitStream("p0", "n/2", limit: 3).get()
        XCTAssertTrue(admitted, "the expired member is not counted: n/1, warm-up and n/2")
        _ = await h.checkStreamsTogether(["p0"], members: ["n/1"], renewsExpiry: true)
        let renewed = try await connection.send(["ZRANGE", RedisArg(keys.streams("p0")), "0", "-1"]).get()
        XCTAssertFalse(renewed.array?.compactMap(\.string).contains("dead/1") ?? true)
    }

    /// A stream counts towards its session's limit while its loop's stream-liveness key on the session's
    /// master lives, not until its own deadline: with the key of loop "a" gone (what
    /// its expiry does when "a" died), "a/1" no longer counts though its deadline is a minute off; with the
    /// key back (Redis lost it and "a" set it again), it counts again. An admission sets its own loop's key.
    func testAStreamCountsWhileItsLoopsStreamLivenessKeyLivesNotUntilItsDeadline() async throws {
        let h = harness()
        _ = try await h.create("q", "owner").get()
        let admit: @Sendable (String, Int) async -> Result<Bool, StoreError> = { member, limit in
            await h.call { s, done in
                s.admitStream(sessionID: "q", member: member, limit: limit, ttlMilliseconds: 60_000, completion: done)
            }
        }
        let aKey = RedisArg(keys.streamLive(holder: "a", tag: ClusterKeys.unshardedLiveTag))
        let first = await admit("a/1", 1)
        XCTAssertEqual(first, .success(true))
        let ttl = try await connection.send(["PTTL", aKey]).get().int ?? -1
        XCTAssertTrue((1...30_000).contains(ttl), "the admission set its loop's key, for 30 s: \(ttl)")
        let refused = await admit("b/1", 1)
        XCTAssertEqual(refused, .success(false), "a/1 counts while a's key lives")
        _ = try await connection.send(["DEL", aKey]).get()
        let admitted = await admit("b/1", 1)
        XCTAssertEqual(admitted, .success(true), "a/1 counts no more once a's key is gone")
        _ = try await connection.send(["SET", aKey, "1"]).get()
        let again = await admit("c/1", 2)
        XCTAssertEqual(again, .success(false), "a/1 and b/1 count again: a's key is back")
        let members = try await connection.send(["ZCARD", RedisArg(keys.streams("q"))]).get().int
        XCTAssertEqual(members, 2, "a/1 stayed in the set: its deadline has not passed")
    }

    /// A loop renews the stream-liveness key of every master where it admitted or checked a stream, in one
    /// `SET` each (`keepStreamsLive`), and a check sets its loop's key too; `dropLiveness` (shutdown) deletes
    /// its liveness and stream-liveness keys.
    func testALoopKeepsItsStreamLivenessKeyAndDropsItsKeysAtShutdown() async throws {
        let h = harness()
        let store = try XCTUnwrap(h.store as? RedisSessionStore)
        _ = try await h.create("k", "n").get()
        _ = try await h.admitStream("k", "n/1", limit: 4).get()
        let key = RedisArg(keys.streamLive(holder: "n", tag: ClusterKeys.unshardedLiveTag))
        _ = try await connection.send(["PEXPIRE", key, "50"]).get()
        let sets = try await calls("set")
        await h.call { _, done in
            store.keepStreamsLive()
            done(())
        }
        // Sent on the store's lease connection: awaited by looking, not by its answer.
        let deadline = Date().addingTimeInterval(5)
        var renewed = -2
        while renewed < 1000, Date() < deadline {
            renewed = Int(try await connection.send(["PTTL", key]).get().int ?? -2)
            if renewed < 1000 { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        XCTAssertGreaterThan(renewed, 1000, "renewed for its full time")
        let setsAfter = try await calls("set")
        XCTAssertEqual(setsAfter - sets, 1, "one master, one SET")
        _ = try await connection.send(["DEL", key]).get()
        _ = await h.checkStreamsTogether(["k"], members: ["n/1"], renewsExpiry: false)
        let exists = try await connection.send(["EXISTS", key]).get().int
        XCTAssertEqual(exists, 1, "a check sets its loop's key")

        await h.call { _, done in
            store.dropLiveness()
            done(())
        }
        let left = await h.call { (_, done: @escaping (Bool) -> Void) in
            store.holdersAlive(["n"], forSession: "k") { done($0 == [false]) }
        }
        XCTAssertTrue(left, "n's liveness key is gone")
        let streamKey = try await connection.send(["EXISTS", key]).get().int
        XCTAssertEqual(streamKey, 0, "and its stream-liveness key")
    }

    /// `holdersAlive` answers, per holder, whether its liveness key on the session's master exists: one
    /// `MGET` however many holders.
    func testHoldersAliveReadsEachHoldersLivenessKeyInOneCommand() async throws {
        let h = harness()
        let store = try XCTUnwrap(h.store as? RedisSessionStore)
        _ = try await h.create("v1", "alive-1").get()
        _ = try await h.create("v2", "alive-2").get()
        let mgets = try await calls("mget")
        let answer = await h.call { (_, done: @escaping ([Bool]?) -> Void) in
            store.holdersAlive(["alive-1", "gone", "alive-2"], forSession: "v1", completion: done)
        }
        XCTAssertEqual(answer, [true, false, true])
        let mgetsAfter = try await calls("mget")
        XCTAssertEqual(mgetsAfter - mgets, 1)
    }

    /// Renewals of one holder asked for in one loop iteration are one `SET` of its liveness key, however many
    /// leases, and no script: a lease is held while that key exists. Once the key was found missing (the
    /// holder paused past its TTL, and another took a session meanwhile), each lease is checked one by one
    /// for a lease TTL: ours true, the one taken false.
    func testRenewalsOfOneHolderAreOneLivenessKeyAndTakenLeasesAreFoundOnceItLapsed() async throws {
        let lapses = Mutex<[String]>([])
        let h = harness(onLivenessLapsed: { key in lapses.withLock { $0.append(key) } })
        var leases: [Lease] = []
        for i in 0..<20 { leases.append(try await h.create("r\(i)", "node-a").get()) }
        let live = RedisArg(keys.live(holder: "node-a", tag: ClusterKeys.unshardedLiveTag))
        let (sets, evals) = (try await calls("set"), try await evalCalls())
        let answers = await h.renewTogether(leases)
        XCTAssertEqual(answers, Array(repeating: .success(true), count: 20))
        let setsAfter = try await calls("set")
        XCTAssertEqual(setsAfter - sets, 1, "twenty renewals, one SET")
        let evalsAfter = try await evalCalls()
        XCTAssertEqual(evalsAfter - evals, 0, "and no lease looked at")
        let ttl = try await connection.send(["PTTL", live]).get().int ?? 0
        XCTAssertGreaterThan(ttl, 9000, "the liveness key lives a lease TTL (10 s)")
        let sessionTTL = try await connection.send(["TTL", RedisArg(keys.session("r3"))]).get().int ?? 0
        XCTAssertGreaterThan(sessionTTL, 1800, "the lease is part of the session: it expires with it")
        let r3Keys = try await connection.send(["KEYS", RedisArg(keys.prefix + ":s:{r3}*")]).get().array
        XCTAssertEqual(r3Keys?.count, 1, "no lease key of its own")

        XCTAssertEqual(lapses.withLock { $0 }, [], "a holder's first key is no lapse")
        // node-a's key lapses (a pause past the TTL); node-b takes r3 over.
        await h.expireLease("r3")
        guard case .acquired(let b, _) = try await h.acquire("r3", "node-b").get() else { return XCTFail() }
        XCTAssertEqual(b.token, 2)
        let before = try await evalCalls()
        let checked = await h.renewTogether(leases)
        XCTAssertEqual(checked.filter { $0 == .success(true) }.count, 19)
        XCTAssertEqual(checked[3], .success(false), "the lease taken is found")
        XCTAssertEqual(lapses.withLock { $0 }, [keys.live(holder: "node-a", tag: ClusterKeys.unshardedLiveTag)])
        let afterCheck = try await evalCalls()
        XCTAssertEqual(afterCheck - before, 1, "checked one by one, in one call")
        let again = await h.renew(leases[4])
        XCTAssertEqual(again, .success(true))
        let afterAgain = try await evalCalls()
        XCTAssertEqual(afterAgain - before, 2, "for a lease TTL after the lapse, every renewal is checked")
        let theirs = await h.renew(b)
        XCTAssertEqual(theirs, .success(true), "node-b's first key: nothing of it to check")
        let afterTheirs = try await evalCalls()
        XCTAssertEqual(afterTheirs - before, 2)
    }

    /// A holder re-acquiring keeps its token only while the fence still names it: a fence moved on by a
    /// writer that does not keep the `lease` field (a node of an earlier build, during a rolling deploy) would
    /// otherwise leave it a token every commit of which is fenced, for good.
    func testAHolderWhoseTokenTheFenceHasPassedGetsANewOne() async throws {
        let h = harness()
        let a = try await h.create("f", "node-a").get()
        _ = try await connection.send(["HINCRBY", RedisArg(keys.session("f")), "fence", "1"]).get()
        guard case .acquired(let again, _) = try await h.acquire("f", "node-a").get() else { return XCTFail() }
        XCTAssertEqual(again.token, 3, "past the fence (2), not the token it held (1)")
        let stale = await h.commit(a, ["x"], state: "x", input: true)
        XCTAssertEqual(stale, .failure(.fenced))
        let fresh = try await h.commit(again, ["y"], state: "y", input: true).get()
        XCTAssertEqual(fresh.inputSeq, 1)
        guard case .acquired(let kept, _) = try await h.acquire("f", "node-a").get() else { return XCTFail() }
        XCTAssertEqual(kept.token, 3, "a current token is kept")
    }

    func calls(_ command: String) async throws -> Int {
        let stats = try await connection.send(["INFO", "commandstats"]).get().string ?? ""
        let line = stats.split(separator: "\r\n").first { $0.hasPrefix("cmdstat_\(command):") } ?? ""
        return Int(line.split(separator: "=").dropFirst().first?.prefix { $0.isNumber } ?? "") ?? 0
    }

    func evalCalls() async throws -> Int {
        let stats = try await connection.send(["INFO", "commandstats"]).get().string ?? ""
        let line = stats.split(separator: "\r\n").first { $0.hasPrefix("cmdstat_evalsha:") } ?? ""
        return Int(line.split(separator: "=")[1].prefix { $0.isNumber }) ?? -1
    }

    /// Commits asked for in one loop iteration are one `EVALSHA` (`commitMany`), each fenced and answered
    /// for itself: two sessions' commits succeed with their own ids and `inputSeq`, a third whose token is
    /// stale is refused and leaves its session as it was.
    func testCommitsOfOneLoopIterationAreOneRoundTripEachFencedForItself() async throws {
        let h = harness()
        let a = try await h.create("c1", "node-a").get()
        let b = try await h.create("c2", "node-a").get()
        _ = try await h.create("c3", "node-a").get()
        _ = try await h.commit(a, ["warm-up"], state: "a1", input: true).get()  // NOSCRIPT, then loaded
        let stale = Lease(sessionID: "c3", holder: "node-a", token: 7)
        let commits = [
            SessionCommit(lease: a, events: [Array("a-event".utf8)], state: Array("a2".utf8), isInput: true),
            SessionCommit(
                lease: b, events: [Array("b1".utf8), Array("b2".utf8)], state: Array("b".utf8), isInput: true),
            SessionCommit(lease: stale, events: [Array("c".utf8)], state: Array("c-new".utf8), isInput: true),
        ]
        let before = try await evalCalls()
        let answers = await h.commitTogether(commits)
        let after = try await evalCalls()
        XCTAssertEqual(after - before, 1, "three commits, one round trip")
        let first = UInt64(1) << 32 + 1
        XCTAssertEqual(answers[0], .success(CommitResult(eventIDs: [first + 1], inputSeq: 2)))
        XCTAssertEqual(answers[1], .success(CommitResult(eventIDs: [first, first + 1], inputSeq: 1)))
        XCTAssertEqual(answers[2], .failure(.fenced))
        let c3 = try await h.load("c3").get()
        XCTAssertEqual(
            c3, SessionSnapshot(state: Array("s0".utf8), seq: 0, inputSeq: 0), "the refused commit wrote nothing")
        let c2 = try await h.load("c2").get()
        XCTAssertEqual(c2, SessionSnapshot(state: Array("b".utf8), seq: first + 1, inputSeq: 1))
        let gone = SessionCommit(
            lease: Lease(sessionID: "nope", holder: "node-a", token: 1), events: [], state: [], isInput: false)
        let r = await h.call { store, done in store.commit(gone, completion: done) }
        XCTAssertEqual(r, .failure(.gone))
    }

    /// While a batch of this loop's commits is in flight, commits asked for in later loop iterations wait
    /// for its answer and then go together: Redis is paused (`CLIENT PAUSE`) while the first commit is out,
    /// three more come one per iteration, and Redis answers two calls, not four; each commit is answered
    /// for itself, in order.
    func testCommitsWaitingForABatchInFlightGoTogether() async throws {
        let h = harness()
        let a = try await h.create("w1", "node-a").get()
        _ = try await h.commit(a, ["warm-up"], state: "w", input: true).get()
        let before = try await evalCalls()
        _ = try await connection.send(["CLIENT", "PAUSE", "300", "ALL"]).get()
        let commit: @Sendable (Int) -> SessionCommit = { n in
            SessionCommit(lease: a, events: [Array("e\(n)".utf8)], state: Array("w\(n)".utf8), isInput: true)
        }
        let loop = self.loop!
        let answers: [Result<CommitResult, StoreError>] = await h.call { store, done in
            nonisolated(unsafe) var got: [Result<CommitResult, StoreError>] = []
            nonisolated(unsafe) var ask: (Int) -> Void = { _ in }
            ask = { n in
                store.commit(commit(n)) { r in
                    got.append(r)
                    if got.count == 4 { done(got) }
                }
                if n < 4 { _ = loop.schedule(after: 0.01) { ask(n + 1) } }  // a later loop iteration
            }
            ask(1)
        }
        let after = try await evalCalls()
        XCTAssertEqual(after - before, 2, "the first commit alone, then the three that waited for it")
        XCTAssertEqual(answers.map { try? $0.get().inputSeq }, [2, 3, 4, 5], "each answered, in order")
        let ids = answers.compactMap { try? $0.get().eventIDs.first }
        XCTAssertEqual(ids, ids.sorted())
        XCTAssertEqual(Set(ids).count, 4)
        let stored = try await h.load("w1").get()
        XCTAssertEqual(stored.inputSeq, 5)
        XCTAssertEqual(stored.state, Array("w4".utf8))
    }

    /// A burst of commits asked for in one loop iteration (every session of a loop reacting to one event)
    /// goes out at most 16 calls at a time, the rest once those are answered: on a connection that takes 20
    /// commands at once, 24 calls' worth (1,536 commits) all succeed. Sent all at once, the calls past the
    /// connection's bound were refused (`overloaded`) and their sessions would have left the node.
    func testABurstOfCommitsStaysWithinTheConnectionsBound() async throws {
        let (small, smallSubscriber) = await startedClient(server.url, on: loop, node: { $0.maxInFlight = 20 })
        let store = RedisSessionStore(client: small, limits: SessionStoreLimits(), keys: keys)
        let h = SessionStoreHarness(loop: loop, store: store) { _ in }
        let count = 64 * 24
        var leases: [Lease] = []
        for i in 0..<count { leases.append(try await h.create("burst\(i)", "node-a").get()) }
        let before = try await evalCalls()
        let answers = await h.commitTogether(
            leases.map { SessionCommit(lease: $0, events: [Array("e".utf8)], state: Array("s1".utf8), isInput: true) })
        let refused = answers.filter { (try? $0.get()) == nil }
        XCTAssertEqual(refused.count, 0, "first refusal: \(String(describing: refused.first))")
        XCTAssertEqual(answers.compactMap { try? $0.get().inputSeq }, Array(repeating: 1, count: count))
        let calls = try await evalCalls() - before
        XCTAssertEqual(calls, 24, "64 commits a call")
        await close(small, smallSubscriber)
    }

    /// A commit asked for while its connection is full (`maxInFlight` commands outstanding, here `PING`s
    /// held by `CLIENT PAUSE`) waits for room and then goes, instead of being refused: before, it
    /// failed with `overloaded` at once, and a refused commit makes its session leave the node.
    func testACommitWaitsForRoomOnAFullConnection() async throws {
        let (small, smallSubscriber) = await startedClient(server.url, on: loop, node: { $0.maxInFlight = 64 })
        let store = RedisSessionStore(client: small, limits: SessionStoreLimits(), keys: keys)
        let h = SessionStoreHarness(loop: loop, store: store) { _ in }
        let lease = try await h.create("full", "node-a").get()
        _ = try await connection.send(["CLIENT", "PAUSE", "300", "ALL"]).get()
        let key = RedisArg(keys.session("full"))
        let answer: Result<CommitResult, StoreError> = await h.call { store, done in
            for _ in small.commandsInFlight(key: key)..<64 { small.send(["PING"], key: key) { _ in } }
            XCTAssertEqual(small.commandsInFlight(key: key), 64, "the connection is full")
            store.commit(SessionCommit(lease: lease, events: [Array("e".utf8)], state: Array("s1".utf8), isInput: true))
            {
                done($0)
            }
        }
        XCTAssertEqual(try answer.get().inputSeq, 1, "waited for room, then applied: \(answer)")
        let stored = try await h.load("full").get()
        XCTAssertEqual(stored.state, Array("s1".utf8))
        await close(small, smallSubscriber)
    }

    /// A write of a session that must follow its commits (here an acquisition by the same holder with a
    /// new token, which bumps the fence) does not overtake a commit waiting for its batch: the commit is
    /// sent first and applied under its token, and the acquisition's snapshot includes it.
    func testAnAcquisitionGoesAfterTheCommitsWaitingBeforeIt() async throws {
        let h = harness()
        let store = try XCTUnwrap(h.store as? RedisSessionStore)
        let a = try await h.create("o1", "node-a").get()
        _ = try await h.commit(a, ["warm-up"], state: "w", input: true).get()
        _ = try await connection.send(["CLIENT", "PAUSE", "300", "ALL"]).get()
        let commit: @Sendable (Int) -> SessionCommit = { n in
            SessionCommit(lease: a, events: [Array("e\(n)".utf8)], state: Array("w\(n)".utf8), isInput: true)
        }
        let loop = self.loop!
        typealias Outcome = (
            first: Result<CommitResult, StoreError>, second: Result<CommitResult, StoreError>,
            grant: Result<LeaseGrant, StoreError>
        )
        let outcome: Outcome = await withCheckedContinuation { k in
            loop.execute {
                nonisolated(unsafe) var first: Result<CommitResult, StoreError>?
                nonisolated(unsafe) var second: Result<CommitResult, StoreError>?
                nonisolated(unsafe) var grant: Result<LeaseGrant, StoreError>?
                func check() {
                    if let first, let second, let grant { k.resume(returning: (first, second, grant)) }
                }
                store.commit(commit(1)) {
                    first = $0
                    check()
                }  // out at the end of this iteration
                _ = loop.schedule(after: 0.01) {
                    store.commit(commit(2)) {
                        second = $0
                        check()
                    }  // waits for the first one's answer
                    store.acquire(sessionID: "o1", holder: "node-a", newToken: true) {
                        grant = $0
                        check()
                    }
                }
            }
        }
        XCTAssertEqual(try outcome.first.get().inputSeq, 2)
        XCTAssertEqual(try outcome.second.get().inputSeq, 3, "applied under its token, before the new one")
        guard case .success(.acquired(let lease, let snapshot)) = outcome.grant else {
            return XCTFail("\(outcome.grant)")
        }
        XCTAssertEqual(lease.token, 2)
        XCTAssertEqual(snapshot.inputSeq, 3, "the snapshot includes the commit asked for before")
        XCTAssertEqual(snapshot.state, Array("w2".utf8))
    }

    /// A streamed session's check is one round trip: `renewStreams` renews the idle expiry of the
    /// session and its history; an acquisition, granted or refused, does too (an input here).
    func testEveryAcquisitionAttemptAndStreamRenewalRenewTheIdleExpiry() async throws {
        let h = harness()
        let lease = try await h.create("w", "node-a").get()
        _ = try await h.commit(lease, ["e"], state: "s").get()
        func shorten() async throws {
            for key in [keys.session("w"), keys.events("w")] {
                let set = try await connection.send(["EXPIRE", RedisArg(key), "5"]).get().int
                XCTAssertEqual(set, 1)
            }
        }
        func assertRenewed(_ why: String) async throws {
            for key in [keys.session("w"), keys.events("w")] {
                let ttl = try await connection.send(["TTL", RedisArg(key)]).get().int ?? -1
                XCTAssertGreaterThan(ttl, 1000, "\(why): \(key)")
            }
        }
        try await shorten()
        guard case .heldBy = try await h.acquire("w", "node-b").get() else { return XCTFail("A holds it") }
        try await assertRenewed("a refused acquisition")
        try await shorten()
        let renewed = await h.renewStreams("w", [])
        XCTAssertEqual(renewed, .success("node-a"))
        try await assertRenewed("a stream renewal")
        let gone = await h.renewStreams("nobody", [])
        XCTAssertEqual(gone, .failure(.gone))
    }

    /// A commit that does not renew the expiry (`renewsExpiry` false: the node renewed it less than
    /// `expiryRenewalSeconds` ago) writes no `EXPIRE` and leaves both keys' expiry as it was; one that renews
    /// gives both the expiry again, the history too when the commit has no event.
    func testOnlyACommitThatRenewsTouchesTheExpiry() async throws {
        let h = harness()
        let lease = try await h.create("r", "node-a").get()
        _ = try await h.commit(lease, ["e1"], state: "s1").get()
        let both = [keys.session("r"), keys.events("r")]
        for key in both { _ = try await connection.send(["EXPIRE", RedisArg(key), "50"]).get() }
        let before = try await expireCalls()
        _ = try await h.commit(lease, ["e2"], state: "s2", input: true, renews: false).get()
        let after = try await expireCalls()
        XCTAssertEqual(after - before, 0, "no EXPIRE in a commit that does not renew")
        for key in both {
            let ttl = try await connection.send(["TTL", RedisArg(key)]).get().int ?? -1
            XCTAssertTrue((1...50).contains(ttl), "\(key) keeps its expiry: \(ttl)")
        }
        _ = try await h.commit(lease, [], state: "s3", renews: true).get()
        for key in both {
            let ttl = try await connection.send(["TTL", RedisArg(key)]).get().int ?? -1
            XCTAssertGreaterThan(ttl, 1800, "\(key) renewed to idle + renewal interval (1,860 s)")
        }
        let stored = try await h.load("r").get()
        XCTAssertEqual(stored.inputSeq, 1)
        XCTAssertEqual(stored.state, Array("s3".utf8))
    }

    /// The first event of a session comes in a commit that does not renew: the history it starts has
    /// the expiry all the same (no key of a session lives without one).
    func testAHistoryStartedByACommitThatDoesNotRenewHasTheExpiry() async throws {
        let h = harness()
        let lease = try await h.create("n", "node-a").get()
        let r = try await h.commit(lease, ["first", "second"], state: "s1", renews: false).get()
        XCTAssertEqual(r.eventIDs, [lease.firstEventID, lease.firstEventID + 1])
        let ttl = try await connection.send(["TTL", RedisArg(keys.events("n"))]).get().int ?? -1
        XCTAssertGreaterThan(ttl, 1800, "the new history has the expiry: \(ttl)")
        let length = try await connection.send(["XLEN", RedisArg(keys.events("n"))]).get().int
        XCTAssertEqual(length, 2, "each event once")
    }

    /// `EXPIRE` calls Redis ran so far (scripts' own calls included).
    private func expireCalls() async throws -> Int {
        let info = try await connection.send(["INFO", "commandstats"]).get().string ?? ""
        guard let line = info.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("cmdstat_expire:") }),
            let calls = line.split(separator: ",").first?.split(separator: "=").last
        else { return 0 }
        return Int(calls) ?? 0
    }
}

final class RedisLeaseExpiryTests: XCTestCase {
    /// The lease really expires in Redis (PX), with no help from the test: node A stops renewing
    /// (as if SIGSTOPped), B takes over after the TTL, A's later commit is fenced.
    func testAnUnrenewedLeaseExpiresAndItsHolderIsFenced() async throws {
        let server = try RedisServerProcess()
        let loop = startedLoop()
        let (connection, subscriber) = await startedClient(server.url, on: loop)
        defer {
            loop.stop()
            server.kill()
        }
        let store = RedisSessionStore(
            client: connection, limits: SessionStoreLimits(leaseMilliseconds: 150), keys: ClusterKeys(prefix: "t"))
        let h = SessionStoreHarness(loop: loop, store: store) { _ in }
        let a = try await h.create("z", "node-a").get()
        let early = try await h.acquire("z", "node-b").get()
        guard case .heldBy = early else { return XCTFail("\(early)") }
        try await Task.sleep(nanoseconds: 200_000_000)  // waiting for the TTL itself
        let late = try await h.acquire("z", "node-b").get()
        guard case .acquired(let b, _) = late else { return XCTFail("\(late)") }
        XCTAssertEqual(b.token, 2)
        let zombie = await h.commit(a, ["late"], state: "zombie")
        XCTAssertEqual(zombie, .failure(.fenced))
        await close(connection, subscriber)
    }
}
