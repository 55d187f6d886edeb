import ClusterStore
import EventLoop
import Foundation
import RedisClient
import RedisTestSupport
import XCTest

@testable import ClusterRedis

/// Group commit on a real Redis Cluster (3 masters, no replicas): the commits of one loop iteration are one
/// `commitMany` call per master, whose sessions sit in many slots of that master (`allow-cross-slot-keys`),
/// and each commit lands in its own session on the master of its slot.
final class RedisSessionStoreClusterTests: XCTestCase {
    nonisolated(unsafe) static var cluster: RedisClusterProcesses?
    nonisolated(unsafe) static var setUpError: Error?
    let keys = ClusterKeys(prefix: "g")
    var loop: EventLoop!
    var client: RedisClient!
    var subscriber: RedisShardedSubscriber!

    override class func setUp() {
        do { cluster = try RedisClusterProcesses(masters: 3, replicasPerMaster: 0) } catch { setUpError = error }
    }

    override class func tearDown() {
        cluster?.stop()
        cluster = nil
    }

    var cluster: RedisClusterProcesses! { Self.cluster }

    override func setUp() async throws {
        guard Self.cluster != nil else { throw XCTSkip("no cluster: \(String(describing: Self.setUpError))") }
        XCTAssertTrue(cluster.waitUntilHealthy(timeout: 30))
        loop = startedLoop()
        (client, subscriber) = await startedClient(cluster.url, on: loop)
        XCTAssertTrue(client.isReady)
    }

    override func tearDown() async throws {
        if let client, let subscriber { await close(client, subscriber) }
        loop?.stop()
    }

    /// `EVALSHA` calls the masters have answered so far.
    func evalCalls() -> Int {
        cluster.masterPorts.reduce(0) { sum, port in
            let stats = RedisServerProcess.cli(port: port, ["INFO", "commandstats"])
            let line = stats.split(whereSeparator: \.isNewline).first { $0.hasPrefix("cmdstat_evalsha:") } ?? ""
            return sum + (Int(line.split(separator: "=").dropFirst().first?.prefix { $0.isNumber } ?? "") ?? 0)
        }
    }

    /// `count` sessions created (prefix `prefix`), spread over every master and several slots of each.
    func sessions(_ prefix: String, _ count: Int, _ h: SessionStoreHarness, holder: String = "node-a") async throws
        -> [Lease]
    {
        var leases: [Lease] = []
        for i in 0..<count { leases.append(try await h.create("\(prefix)\(i)", holder).get()) }
        let slots = Set(leases.map { RedisSlot.of(keys.session($0.sessionID)) })
        let masters = Set(slots.compactMap { cluster.masterPort(ofSlot: $0) })
        XCTAssertEqual(masters.count, 3, "the sessions are spread over every master")
        XCTAssertGreaterThan(slots.count, 2 * masters.count, "and over several slots of each")
        return leases
    }

    /// Moves `slot` with its keys (at least one) from master `source` to master `target`, as
    /// `redis-cli --cluster reshard` does, and tells every master; the client under test is not told.
    func moveSlot(_ slot: Int, from source: Int, to target: Int, file: StaticString = #filePath, line: UInt = #line) {
        let cli = { (port: Int, args: [String]) in RedisServerProcess.cli(port: port, args) }
        let sourceID = cli(source, ["CLUSTER", "MYID"])
        let targetID = cli(target, ["CLUSTER", "MYID"])
        XCTAssertEqual(
            cli(target, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID]), "OK", file: file, line: line)
        XCTAssertEqual(
            cli(source, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID]), "OK", file: file, line: line)
        let keysInSlot = cli(source, ["CLUSTER", "GETKEYSINSLOT", "\(slot)", "100"])
            .split(whereSeparator: \.isNewline).map(String.init)
        XCTAssertFalse(keysInSlot.isEmpty, file: file, line: line)
        XCTAssertEqual(
            cli(source, ["MIGRATE", "127.0.0.1", "\(target)", "", "0", "5000", "KEYS"] + keysInSlot), "OK",
            file: file, line: line)
        for port in [target] + cluster.masterPorts.filter({ $0 != target }) {
            _ = cli(port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID])
        }
    }

    func testCommitsOfOneIterationAreOneCallPerMasterAcrossSlots() async throws {
        let h = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        let leases = try await sessions("c", 30, h)
        _ = try await h.commit(leases[0], ["warm-up"], state: "w", input: true).get()  // the script loaded
        let before = evalCalls()
        let commits = leases.map {
            SessionCommit(
                lease: $0, events: [Array("e-\($0.sessionID)".utf8)], state: Array("state-\($0.sessionID)".utf8),
                isInput: true)
        }
        let answers = await h.commitTogether(commits)
        XCTAssertEqual(evalCalls() - before, 3, "one call per master, not one per commit or slot")
        for (i, answer) in answers.enumerated() {
            XCTAssertEqual(try answer.get().inputSeq, i == 0 ? 2 : 1, leases[i].sessionID)
            let stored = try await h.load(leases[i].sessionID).get()
            XCTAssertEqual(stored.state, Array("state-\(leases[i].sessionID)".utf8))
        }
    }

    /// A holder's renewals of one iteration are one `SET` of its liveness key per master, each key in a slot
    /// of that master (so the scripts of its sessions can read it). Once the keys lapsed, the leases are
    /// checked one call per master across its slots.
    func testRenewalsOfOneIterationAreOneLivenessKeyPerMaster() async throws {
        let h = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        // A holder of its own: the cluster is shared by this class's tests, and some move slots.
        let leases = try await sessions("r", 30, h, holder: "renewer")
        let before = (calls("set"), evalCalls())
        let answers = await h.renewTogether(leases)
        XCTAssertEqual(answers, Array(repeating: .success(true), count: leases.count))
        XCTAssertEqual(calls("set") - before.0, 3, "one SET per master, not one per lease or slot")
        XCTAssertEqual(evalCalls() - before.1, 0)
        var tags: Set<String> = []
        for port in cluster.masterPorts {
            let found = RedisServerProcess.cli(port: port, ["KEYS", "\(keys.prefix):live:*:renewer"])
                .split(whereSeparator: \.isNewline).map(String.init)
            XCTAssertEqual(found.count, 1, "one liveness key on master \(port): \(found)")
            guard let key = found.first else { continue }
            XCTAssertTrue(key.hasSuffix("}:renewer"), key)
            XCTAssertEqual(cluster.masterPort(ofSlot: RedisSlot.of(key)), port, "in a slot of its master")
            tags.insert(key)
        }
        XCTAssertEqual(tags.count, 3)
        for key in tags {
            let port = try XCTUnwrap(cluster.masterPort(ofSlot: RedisSlot.of(key)))
            _ = RedisServerProcess.cli(port: port, ["DEL", key])
        }
        let lapsed = evalCalls()
        let checked = await h.renewTogether(leases)
        XCTAssertEqual(checked, Array(repeating: .success(true), count: leases.count), "still ours: nobody took them")
        XCTAssertEqual(evalCalls() - lapsed, 3, "checked in one call per master across its slots")
    }

    func calls(_ command: String) -> Int {
        cluster.masterPorts.reduce(0) { sum, port in
            let stats = RedisServerProcess.cli(port: port, ["INFO", "commandstats"])
            let line = stats.split(whereSeparator: \.isNewline).first { $0.hasPrefix("cmdstat_\(command):") } ?? ""
            return sum + (Int(line.split(separator: "=").dropFirst().first?.prefix { $0.isNumber } ?? "") ?? 0)
        }
    }

    func testStreamChecksOfOneIterationAreOneCallPerMasterAcrossSlots() async throws {
        let h = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        let leases = try await sessions("s", 30, h)
        _ = await h.checkStreamsTogether([leases[0].sessionID], members: ["n/0"])  // the script loaded
        let before = evalCalls()
        let answers = await h.checkStreamsTogether(leases.map(\.sessionID), members: ["n/1"])
        XCTAssertEqual(evalCalls() - before, 3, "one call per master, not one per session or slot")
        XCTAssertEqual(answers, Array(repeating: .success(StreamsCheck(holder: "node-a", seq: 0)), count: 30))
        for l in leases {
            let score = await client.send(
                ["ZSCORE", RedisArg(keys.streams(l.sessionID)), "n/1"], key: RedisArg(keys.streams(l.sessionID)))
            XCTAssertNotNil(try score.get().string, "\(l.sessionID): the member has its deadline")
        }
    }

    /// Stream-liveness keys on a Redis Cluster: an admission sets its loop's key on the
    /// session's master, and the members of every session there count while it lives; the loop renews one
    /// key per master (`keepStreamsLive`: three `SET`s for 30 streamed sessions); with its keys gone (what
    /// their expiry does when the loop died), its members count on no master.
    func testStreamLivenessKeysAreOnePerMasterAndCountTheMembersOfEverySessionThere() async throws {
        // Two loops' stores: "n" streams first, "m" asks for a place after it.
        let store = RedisSessionStore(client: client, keys: keys)
        let h = SessionStoreHarness(loop: loop, store: store) { _ in }
        let other = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        let leases = try await sessions("l", 30, h)
        let admit: @Sendable (String, String) async -> Result<Bool, StoreError> = { id, member in
            await (member.hasPrefix("n/") ? h : other).call { s, done in
                s.admitStream(sessionID: id, member: member, limit: 1, ttlMilliseconds: 60_000, completion: done)
            }
        }
        for l in leases {
            let first = await admit(l.sessionID, "n/1")
            XCTAssertEqual(first, .success(true))
            let second = await admit(l.sessionID, "m/1")
            XCTAssertEqual(second, .success(false), "\(l.sessionID): n/1 counts on its master")
        }
        let sets = calls("set")
        await h.call { _, done in
            store.keepStreamsLive()
            done(())
        }
        // Sent on the lease connections: awaited by looking.
        let deadline = Date().addingTimeInterval(5)
        while calls("set") - sets < 3, Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(calls("set") - sets, 3, "one key per master, not per session or slot")
        for port in cluster.masterPorts {
            let found = RedisServerProcess.cli(port: port, ["KEYS", "g:slive:*"])
            let names = found.split(whereSeparator: \.isNewline).map(String.init)
            XCTAssertEqual(names.count, 1, "master \(port): n's key only (m was refused): \(names)")
            for key in names { _ = RedisServerProcess.cli(port: port, ["DEL", key]) }
        }
        for l in leases {
            let admitted = await admit(l.sessionID, "m/1")
            XCTAssertEqual(admitted, .success(true), "\(l.sessionID): n/1 counts no more")
        }
    }

    /// A batch naming a session the master does not serve (a slot map out of date) fails as a whole with
    /// `CROSSSLOT`, and the commit before it in the batch, on a session the master does serve, is not
    /// written: nothing of a batch runs unless all of it can.
    func testABatchWithASessionOfAnotherMasterWritesNothing() async throws {
        let h = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        let leases = try await sessions("x", 12, h)
        let master = { (l: Lease) in self.cluster.masterPort(ofSlot: RedisSlot.of(self.keys.session(l.sessionID))) }
        let here = leases[0]
        let elsewhere = try XCTUnwrap(leases.first { master($0) != master(here) })
        func commitArgs(_ l: Lease) -> [RedisArg] {
            let id = l.sessionID
            return [
                RedisArg(keys.session(id)), RedisArg(keys.events(id)), RedisArg(keys.idempotency(id, "")),
                RedisArg(Int(l.token)), "new", "1", "0", "", "1", "1", "event",
            ]
        }
        let args: [RedisArg] = ["256", "1800", "300", "2"] + commitArgs(here) + commitArgs(elsewhere)
        let r: Result<RESPValue, RedisError> = await withCheckedContinuation { k in
            let client = self.client!
            let route = RedisArg(keys.session(here.sessionID))
            loop.execute {
                client.evalScript(SessionScripts.commitMany, keys: [route], args: args) { k.resume(returning: $0) }
            }
        }
        guard case .failure(let e) = r else { return XCTFail("\(r)") }
        XCTAssertEqual(e.serverCode, "CROSSSLOT", "\(e)")
        XCTAssertTrue(e.isSlotRedirect)
        let stored = try await h.load(here.sessionID).get()
        XCTAssertEqual(stored, SessionSnapshot(state: Array("s0".utf8), seq: 0, inputSeq: 0), "nothing written")
    }
    /// A commit while its session's slot is being migrated (`redis-cli --cluster reshard`: `MIGRATING` at the
    /// source, no key moved yet) brings a new idempotency key, which Redis will not make on the source: the
    /// commit fails before anything is written (no event, no `inputSeq`), so its retry is applied once.
    /// Before, the script wrote the event and the `inputSeq`, then failed on the key ("non local key"): the
    /// keyed retry found no key and was applied again (`ClusterFailoverTests`' reshard test, 2 runs in 30).
    func testACommitDuringASlotMigrationWritesNothingWhenAKeyWouldBeMadeOnTheWrongSide() async throws {
        let h = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        let lease = try await h.create("migrating", "node-a").get()
        _ = try await h.commit(lease, ["e1"], state: "s1", input: true, key: "k1").get()
        let slot = RedisSlot.of(keys.session(lease.sessionID))
        let source = try XCTUnwrap(cluster.masterPort(ofSlot: slot))
        let target = try XCTUnwrap(cluster.masterPorts.first { $0 != source })
        let cli = { (port: Int, args: [String]) in RedisServerProcess.cli(port: port, args) }
        let sourceID = cli(source, ["CLUSTER", "MYID"])
        let targetID = cli(target, ["CLUSTER", "MYID"])
        XCTAssertEqual(cli(target, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID]), "OK")
        XCTAssertEqual(cli(source, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID]), "OK")
        defer {
            for port in [source, target] { _ = cli(port, ["CLUSTER", "SETSLOT", "\(slot)", "STABLE"]) }
        }
        let r = await h.commit(lease, ["e2"], state: "s2", input: true, key: "k2")
        guard case .failure = r else { return XCTFail("the commit cannot make its key on the source: \(r)") }
        let hash = cli(source, ["HMGET", keys.session(lease.sessionID), "state", "inputSeq"])
        XCTAssertEqual(hash, "s1\n1", "neither the state nor the inputSeq written")
        XCTAssertEqual(cli(source, ["XLEN", keys.events(lease.sessionID)]), "1", "no event written")
        // The slot settles back: the retry is applied, once.
        for port in [source, target] { _ = cli(port, ["CLUSTER", "SETSLOT", "\(slot)", "STABLE"]) }
        let retried = try await h.commit(lease, ["e2"], state: "s2", input: true, key: "k2").get()
        XCTAssertEqual(retried.inputSeq, 2)
        let stored = try await h.inputSeq(lease.sessionID, key: "k2").get()
        XCTAssertEqual(stored, 2)
    }

    /// A session's slot moves to another master (a reshard): its lease moves with its hash, but its holder,
    /// which holds nothing else there, has no liveness key there, so the lease is free at the new master and
    /// another holder takes it. The holder's next renewal sets its key there, finds it missing, and checks the
    /// lease: taken, false. Its lease of a session that stayed is not disturbed.
    func testALeaseWhoseSlotMovedIsCheckedAtItsNewMaster() async throws {
        let h = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        let master = { (id: String) in self.cluster.masterPort(ofSlot: RedisSlot.of(self.keys.session(id))) }
        let source = try XCTUnwrap(master("mv0"))
        let slot = RedisSlot.of(keys.session("mv0"))
        let other = try XCTUnwrap(
            (1..<1000).map { "mv\($0)" }.first {
                master($0) == source && RedisSlot.of(keys.session($0)) != slot
            })
        let moving = try await h.create("mv0", "mover").get()
        let staying = try await h.create(other, "mover").get()
        let target = try XCTUnwrap(cluster.masterPorts.first { $0 != source })
        let cli = { (port: Int, args: [String]) in RedisServerProcess.cli(port: port, args) }
        moveSlot(slot, from: source, to: target)
        XCTAssertEqual(cli(target, ["KEYS", "\(keys.prefix):live:*:mover"]), "", "no key of the mover there yet")
        // Another holder takes the moved session at its new master (its first call there follows `MOVED`,
        // which mends the client's map, and is sent again with that master's tag: `LIVETAG`).
        guard case .acquired(let taken, _) = try await h.acquire("mv0", "taker").get() else {
            return XCTFail("the lease is free at the new master")
        }
        XCTAssertEqual(taken.token, 2)
        let answers = await h.renewTogether([moving, staying])
        XCTAssertEqual(answers, [.success(false), .success(true)], "the moved lease checked, the other kept")
        XCTAssertFalse(cli(target, ["KEYS", "\(keys.prefix):live:*:mover"]).isEmpty, "the mover's key set there")
    }

    /// The client's slot map out of date (a session's slot moved to another master behind its back): a
    /// batch it sends to the old master is refused with `CROSSSLOT` before anything is written, sent
    /// again one slot at a time, and the moved session's call follows `MOVED`: every commit applied once.
    func testABatchOverAStaleSlotMapIsSentAgainPerSlot() async throws {
        let h = SessionStoreHarness(loop: loop, store: RedisSessionStore(client: client, keys: keys)) { _ in }
        let leases = try await sessions("m", 30, h)
        let master = { (l: Lease) in self.cluster.masterPort(ofSlot: RedisSlot.of(self.keys.session(l.sessionID))) }
        let moving = leases[0]
        let source = try XCTUnwrap(master(moving))
        let staying = try XCTUnwrap(leases.dropFirst().first { master($0) == source })
        let target = try XCTUnwrap(cluster.masterPorts.first { $0 != source })
        _ = try await h.commit(staying, ["warm-up"], state: "w", input: true).get()  // the script loaded
        // The slot moves from `source` to `target`; the client is not told.
        let slot = RedisSlot.of(keys.session(moving.sessionID))
        let cli = { (port: Int, args: [String]) in RedisServerProcess.cli(port: port, args) }
        moveSlot(slot, from: source, to: target)
        func crossSlotErrors() -> Int {
            let stats = cli(source, ["INFO", "errorstats"])
            let line = stats.split(whereSeparator: \.isNewline).first { $0.hasPrefix("errorstat_CROSSSLOT:") } ?? ""
            return Int(line.split(separator: "=").dropFirst().first?.prefix { $0.isNumber } ?? "") ?? 0
        }
        let refusedBefore = crossSlotErrors()
        let commits = [staying, moving].map {
            SessionCommit(
                lease: $0, events: [Array("e".utf8)], state: Array("after-\($0.sessionID)".utf8), isInput: true)
        }
        let answers = await h.commitTogether(commits)
        XCTAssertEqual(crossSlotErrors() - refusedBefore, 1, "the batch was refused once, as a whole")
        XCTAssertEqual(try answers[0].get().inputSeq, 2, "the session that stayed")
        XCTAssertEqual(try answers[1].get().inputSeq, 1, "the session that moved, after MOVED")
        for l in [staying, moving] {
            let stored = try await h.load(l.sessionID).get()
            XCTAssertEqual(stored.state, Array("after-\(l.sessionID)".utf8), "applied once")
        }
    }
}
