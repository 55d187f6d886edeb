import ClusterStore
import XCTest

/// The rules every `SessionStore` keeps, run against the in-memory and the Redis store.
enum SessionStoreContract {
    static func createCommitReplay(_ h: SessionStoreHarness) async throws {
        let lease = try await h.create("a", "node1").get()
        XCTAssertEqual(lease.token, 1)
        let dup = await h.create("a", "node2")
        XCTAssertThrowsError(try dup.get(), "a session id is created once")
        let c1 = try await h.commit(lease, ["e1", "e2"], state: "s1", input: true, key: "k1").get()
        XCTAssertEqual(c1.eventIDs, [1 << 32 + 1, 1 << 32 + 2], "token 1's ids start above 1 << 32")
        XCTAssertEqual(c1.inputSeq, 1)
        let c2 = try await h.commit(lease, ["e3"], state: "s2").get()
        XCTAssertEqual(c2, CommitResult(eventIDs: [1 << 32 + 3], inputSeq: nil), "an effect's commit has no inputSeq")
        let c3 = try await h.commit(lease, [], state: "s3", input: true).get()
        XCTAssertEqual(c3, CommitResult(eventIDs: [], inputSeq: 2))
        let snap = try await h.load("a").get()
        XCTAssertEqual(snap, SessionSnapshot(state: Array("s3".utf8), seq: 1 << 32 + 3, inputSeq: 2))
        let idem = try await h.inputSeq("a", key: "k1").get()
        XCTAssertEqual(idem, 1)
        let unknownKey = try await h.inputSeq("a", key: "k2").get()
        XCTAssertNil(unknownKey)
        let r1 = try await h.replay("a", after: 1 << 32 + 1).get()
        XCTAssertEqual(
            r1,
            .events([
                StoredEvent(id: 1 << 32 + 2, payload: Array("e2".utf8)),
                StoredEvent(id: 1 << 32 + 3, payload: Array("e3".utf8)),
            ]))
        let r2 = try await h.replay("a", after: 1 << 32 + 3).get()
        XCTAssertEqual(r2, .upToDate)
        let r3 = try await h.replay("a", after: 12345).get()
        XCTAssertEqual(r3, .snapshotNeeded, "an id never committed gets a snapshot")
        let r4 = try await h.replay("a", after: 1 << 32 + 1, limit: 1).get()
        XCTAssertEqual(r4, .snapshotNeeded, "more missed events than the limit get a snapshot")
        let missing = await h.load("nope")
        XCTAssertEqual(missing, .failure(.gone))
        let gone = await h.acquire("nope", "node1")
        XCTAssertEqual(gone, .failure(.gone))
    }

    static func leaseFencingAndTakeover(_ h: SessionStoreHarness) async throws {
        let a = try await h.create("b", "node-a").get()
        _ = try await h.commit(a, ["a1"], state: "sa", input: true).get()
        let held = try await h.acquire("b", "node-b").get()
        guard case .heldBy(let holder, let remaining) = held else { return XCTFail("\(held)") }
        XCTAssertEqual(holder, "node-a")
        XCTAssertGreaterThan(remaining, 0)
        let again = try await h.acquire("b", "node-a").get()
        guard case .acquired(let same, _) = again else { return XCTFail("\(again)") }
        XCTAssertEqual(same.token, a.token, "the holder re-acquiring keeps its token")
        let renewed = try await h.renew(a).get()
        XCTAssertTrue(renewed)

        // node-a stops answering (SIGSTOP) and its lease runs out; node-b takes over.
        await h.expireLease("b")
        let taken = try await h.acquire("b", "node-b").get()
        guard case .acquired(let b, let snapshot) = taken else { return XCTFail("\(taken)") }
        XCTAssertEqual(b.token, 2)
        XCTAssertEqual(snapshot, SessionSnapshot(state: Array("sa".utf8), seq: 1 << 32 + 1, inputSeq: 1))
        // node-a comes back (SIGCONT) and tries to write: fenced, nothing changes.
        let zombie = await h.commit(a, ["a2"], state: "zombie", input: true)
        XCTAssertEqual(zombie, .failure(.fenced))
        let zombieRenew = try await h.renew(a).get()
        XCTAssertFalse(zombieRenew)
        let zombieRelease = try await h.release(a).get()
        XCTAssertFalse(zombieRelease)
        let zombieDelete = await h.delete(a)
        XCTAssertFalse(zombieDelete)
        let c = try await h.commit(b, ["b1"], state: "sb", input: true).get()
        XCTAssertEqual(c.eventIDs, [2 << 32 + 1], "ids jump forward to the new token's range")
        XCTAssertEqual(c.inputSeq, 2, "inputSeq continues, never reused")
        let replay = try await h.replay("b", after: 1 << 32 + 1).get()
        XCTAssertEqual(replay, .events([StoredEvent(id: 2 << 32 + 1, payload: Array("b1".utf8))]))
        let state = try await h.load("b").get()
        XCTAssertEqual(state.state, Array("sb".utf8))

        // Graceful hand-over: released at once, the next holder gets a larger token.
        let released = try await h.release(b).get()
        XCTAssertTrue(released)
        let handed = try await h.acquire("b", "node-a").get()
        guard case .acquired(let a2, _) = handed else { return XCTFail("\(handed)") }
        XCTAssertEqual(a2.token, 3)
        let stale = await h.commit(b, [], state: "x")
        XCTAssertEqual(stale, .failure(.fenced))
        let deleted = await h.delete(a2)
        XCTAssertTrue(deleted)
        let after = await h.load("b")
        XCTAssertEqual(after, .failure(.gone))
        let afterCommit = await h.commit(a2, ["x"], state: "x")
        XCTAssertEqual(afterCommit, .failure(.gone))
    }

    /// The deadline the stream contract admits and renews with (ms).
    static let streamTTL = 60_000

    /// The cluster-wide stream limit: admitted up to the limit and refused past it; a release frees a
    /// place at once; a stream whose deadline passed (its node died) stops counting, while one renewed
    /// since keeps counting; the renewal names the lease's holder; a deleted session has no streams.
    static func streamLimit(_ h: SessionStoreHarness) async throws {
        let lease = try await h.create("st", "node-a").get()
        for m in ["a/1", "a/2", "b/1"] {
            let admitted = try await h.admitStream("st", m, limit: 3).get()
            XCTAssertTrue(admitted, "\(m): under the limit")
        }
        let fourth = try await h.admitStream("st", "c/1", limit: 3).get()
        XCTAssertFalse(fourth, "a fourth stream on any node is refused")
        let again = try await h.admitStream("st", "a/1", limit: 3).get()
        XCTAssertTrue(again, "a stream admitted already is admitted again, not counted twice")
        let stillFull = try await h.admitStream("st", "c/1", limit: 3).get()
        XCTAssertFalse(stillFull)

        // A closed stream frees its place at once; releasing twice or an unknown one is harmless.
        try await h.releaseStream("st", "a/2").get()
        try await h.releaseStream("st", "a/2").get()
        try await h.releaseStream("st", "x/9").get()
        let freed = try await h.admitStream("st", "c/1", limit: 3).get()
        XCTAssertTrue(freed, "the released place is taken by a stream on another node")
        let full = try await h.admitStream("st", "c/2", limit: 3).get()
        XCTAssertFalse(full)

        // Node b dies: its stream is never renewed. Every deadline passes; nodes a and c renew theirs
        // (the periodic check), so only b's place is free again.
        let holder = try await h.renewStreams("st", ["a/1"]).get()
        XCTAssertEqual(holder, "node-a", "the renewal names the lease's holder")
        await h.passStreamDeadlines("st")
        _ = try await h.renewStreams("st", ["a/1"]).get()
        _ = try await h.renewStreams("st", ["c/1"]).get()
        let afterDeath = try await h.admitStream("st", "c/2", limit: 3).get()
        XCTAssertTrue(afterDeath, "the dead node's stream stopped counting at its deadline")
        let overAgain = try await h.admitStream("st", "c/3", limit: 3).get()
        XCTAssertFalse(overAgain, "the renewed streams still count")

        // A renewal counts a stream again whose deadline passed while it stayed open (a store outage).
        await h.passStreamDeadlines("st")
        _ = try await h.renewStreams("st", ["a/1", "c/1", "c/2"]).get()
        let recounted = try await h.admitStream("st", "c/3", limit: 3).get()
        XCTAssertFalse(recounted, "renewed members are counted again")

        await h.expireLease("st")
        let nobody = try await h.renewStreams("st", []).get()
        XCTAssertNil(nobody, "no lease: the renewal says so (a streaming node takes the session over)")

        let gone = await h.admitStream("nope", "a/1", limit: 3)
        XCTAssertEqual(gone, .failure(.gone))
        let goneRenewal = await h.renewStreams("nope", ["a/1"])
        XCTAssertEqual(goneRenewal, .failure(.gone))
        guard case .acquired(let current, _) = try await h.acquire("st", "node-b").get() else {
            return XCTFail("the lease is free")
        }
        XCTAssertGreaterThan(current.token, lease.token)
        let deleted = await h.delete(current)
        XCTAssertTrue(deleted)
        let afterDelete = await h.admitStream("st", "a/1", limit: 3)
        XCTAssertEqual(afterDelete, .failure(.gone))
    }

    /// A history of `history` events: an id with `history` or more events after it gets a snapshot, one
    /// with fewer gets them replayed, whatever the store keeps beyond (Redis trims whole stream nodes).
    static func historyIsBounded(_ h: SessionStoreHarness, history: Int) async throws {
        let lease = try await h.create("c", "n").get()
        for i in 0..<(history * 3) { _ = try await h.commit(lease, ["e\(i)"], state: "s").get() }
        let old = try await h.replay("c", after: 1 << 32 + 1, limit: history).get()
        XCTAssertEqual(old, .snapshotNeeded, "trimmed ids get a snapshot")
        let last = UInt64(1 << 32 + history * 3)
        let recent = try await h.replay("c", after: last - 2, limit: history).get()
        XCTAssertEqual(recent.eventCount, 2)
        let oldest = try await h.replay("c", after: last - UInt64(history - 1), limit: history).get()
        XCTAssertEqual(oldest.eventCount, history - 1, "the oldest id of the history: the rest replayed")
        let outside = try await h.replay("c", after: last - UInt64(history), limit: history).get()
        XCTAssertEqual(outside, .snapshotNeeded, "one more back is outside a history of \(history)")
    }
}

extension ReplayResult {
    var eventCount: Int {
        if case .events(let e) = self { return e.count }
        return -1
    }
}
