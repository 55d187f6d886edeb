import ClusterRedis
import ClusterStore
import EventLoop
import Foundation
import RedisClient
import XCTest

/// The commit window (`RedisSessionStore`, "Commit window"): while a loop commits to a master more often
/// than once per window, a commit that would go alone waits up to one window for the next ones, and they go
/// in one call; a commit after a quiet spell, a full batch, and the commits an acquisition must follow go at
/// once. The windows here are long (0.5–10 s) against what is measured, so a busy machine cannot flip a
/// result: "at once" is asserted as "well before the window ended".
extension RedisSessionStoreTests {
    /// Commits asked `n` at a time in consecutive loop iterations, 5 ms apart (each iteration its own
    /// batch without a window); the answers in order, and the seconds from the first ask to the last answer.
    func commitsInSeparateIterations(
        _ h: SessionStoreHarness, _ lease: Lease, count: Int
    ) async -> (answers: [Result<CommitResult, StoreError>], seconds: Double) {
        let loop = self.loop!
        let start = Date()
        let answers: [Result<CommitResult, StoreError>] = await h.call { store, done in
            nonisolated(unsafe) var got: [Result<CommitResult, StoreError>] = []
            nonisolated(unsafe) var ask: (Int) -> Void = { _ in }
            ask = { n in
                let c = SessionCommit(
                    lease: lease, events: [Array("e\(n)".utf8)], state: Array("w\(n)".utf8), isInput: true)
                store.commit(c) { r in
                    got.append(r)
                    if got.count == count { done(got) }
                }
                if n < count { _ = loop.schedule(after: 0.005) { ask(n + 1) } }
            }
            ask(1)
        }
        return (answers, Date().timeIntervalSince(start))
    }

    /// Busy (the previous commit was asked less than a window ago): three commits asked in three loop
    /// iterations wait for the window and go in one call, each answered for itself and in order. Without
    /// the window (0) the same three are three calls.
    func testWhileBusyCommitsOfSeparateIterationsWaitForTheWindowAndGoTogether() async throws {
        for (window, calls) in [(0.5, 1), (0, 3)] {
            let h = harness(commitWindow: window)
            let lease = try await h.create("cw\(calls)", "node-a").get()
            _ = try await h.commit(lease, ["warm-up"], state: "w", input: true).get()
            let before = try await evalCalls()
            let (answers, _) = await commitsInSeparateIterations(h, lease, count: 3)
            let after = try await evalCalls()
            XCTAssertEqual(after - before, calls, "window \(window)")
            XCTAssertEqual(answers.map { try? $0.get().inputSeq }, [2, 3, 4], "each answered, in order")
            let stored = try await h.load("cw\(calls)").get()
            XCTAssertEqual(stored.inputSeq, 4)
            XCTAssertEqual(stored.state, Array("w3".utf8))
        }
    }

    /// Not busy: the first commit of a master, and a commit asked more than a window after the previous
    /// one, go at once (answered long before the window would have ended).
    func testACommitAfterAQuietSpellGoesAtOnce() async throws {
        let h = harness(commitWindow: 0.5)
        let lease = try await h.create("q1", "node-a").get()
        var start = Date()
        _ = try await h.commit(lease, ["first"], state: "w1", input: true).get()
        XCTAssertLessThan(Date().timeIntervalSince(start), 0.4, "the first commit waited for the window")
        try await Task.sleep(nanoseconds: 600_000_000)  // the quiet spell itself: longer than the window
        start = Date()
        let r = try await h.commit(lease, ["after"], state: "w2", input: true).get()
        XCTAssertLessThan(Date().timeIntervalSince(start), 0.4, "a commit after a quiet spell waited for the window")
        XCTAssertEqual(r.inputSeq, 2)
    }

    /// A full batch (`commitBatch`, 64) goes at once, in one call, whatever the window (10 s here).
    func testAFullBatchDoesNotWaitForTheWindow() async throws {
        let h = harness(commitWindow: 10)
        let lease = try await h.create("fb", "node-a").get()
        _ = try await h.commit(lease, ["warm-up"], state: "w", input: true).get()
        let before = try await evalCalls()
        let start = Date()
        let items = (1...64).map { n in
            SessionCommit(lease: lease, events: [Array("e\(n)".utf8)], state: Array("w\(n)".utf8), isInput: true)
        }
        let answers = await h.commitTogether(items)
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "a full batch waited for the window")
        let after = try await evalCalls()
        XCTAssertEqual(after - before, 1)
        XCTAssertEqual(answers.map { try? $0.get().inputSeq }, (2...65).map { UInt64($0) })
    }

    /// An acquisition sends the commits held for the window first, and at once: the held commit is applied
    /// under its token and the acquisition's snapshot includes it, long before the window (10 s) ends.
    func testAnAcquisitionSendsTheHeldCommitsAtOnce() async throws {
        let h = harness(commitWindow: 10)
        let lease = try await h.create("ha", "node-a").get()
        _ = try await h.commit(lease, ["warm-up"], state: "w", input: true).get()
        let start = Date()
        typealias Outcome = (commit: Result<CommitResult, StoreError>, grant: Result<LeaseGrant, StoreError>)
        let outcome: Outcome = await h.call { store, done in
            nonisolated(unsafe) var commit: Result<CommitResult, StoreError>?
            nonisolated(unsafe) var grant: Result<LeaseGrant, StoreError>?
            func check() { if let commit, let grant { done((commit, grant)) } }
            let c = SessionCommit(lease: lease, events: [Array("held".utf8)], state: Array("w2".utf8), isInput: true)
            store.commit(c) {  // held: the previous commit was just now
                commit = $0
                check()
            }
            store.acquire(sessionID: "ha", holder: "node-a", newToken: true) {
                grant = $0
                check()
            }
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "the acquisition waited for the window")
        XCTAssertEqual(try outcome.commit.get().inputSeq, 2, "applied under its token, before the new one")
        guard case .success(.acquired(let newLease, let snapshot)) = outcome.grant else {
            return XCTFail("\(outcome.grant)")
        }
        XCTAssertEqual(newLease.token, 2)
        XCTAssertEqual(snapshot.inputSeq, 2)
        XCTAssertEqual(snapshot.state, Array("w2".utf8))
    }
}
