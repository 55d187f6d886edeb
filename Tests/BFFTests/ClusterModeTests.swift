import Foundation
import GitHubSearch
import JSON
import RedisTestSupport
import WireClient
import XCTest

@testable import BFF

/// Cluster mode end to end in one process: several `Application`s on 127.0.0.1:0 sharing one real
/// `redis-server` (started on a free port per test). Waiting for Redis readiness and for a lease to
/// expire polls a condition with a deadline (the guarantees are "within N seconds"); everything else
/// awaits a response or an event.
class ClusterModeTests: ClusterTestCase {
    func testSessionCreatedOnAIsReadOnEveryNodeAndInputsAtTheOwnerAreAcknowledgedOnceStored() throws {
        let a = try node("a")
        let b = try node("b")
        let c = try node("c")
        let id = try a.createSession()
        let r = try name(a, id, "ann")
        XCTAssertEqual(r.status, 202)
        XCTAssertEqual(inputSeq(r), 1)
        XCTAssertEqual(inputSeq(try greet(a, id)), 2)
        // The 202 came after the commit: every node reads the input's effect at once.
        let stateA = try a.state(id)
        XCTAssertEqual(stateA["viewModels"]?["greeting"]?["label"], "Hello, ANN!")
        XCTAssertEqual(try b.state(id), stateA)
        XCTAssertEqual(try c.state(id), stateA)
        XCTAssertEqual(stateA["seq"]?.intValue, (1 << 32) + 2, "the creator's token 1 starts ids at 2^32 + 1")
        // An Idempotency-Key is stored with the commit: the retry gets the same number, applied once.
        XCTAssertEqual(inputSeq(try name(a, id, "bob", key: "k1")), 3)
        XCTAssertEqual(inputSeq(try name(a, id, "bob", key: "k1")), 3)
        XCTAssertEqual(inputSeq(try greet(a, id)), 4)
        XCTAssertEqual(try label(b, id), "Hello, BOB!")
        // Unknown sessions are 404 on any node.
        XCTAssertEqual(
            try WireConnection.get(port: b.port, path: "/api/sessions/AAAAAAAAAAAAAAAAAAAAAA0/state").status, 404)
    }

    func testAnInputAtANonOwnerIsForwardedToTheOwnerAndAcknowledgedOnlyOnceCommitted() throws {
        let a = try node("a")
        let b = try node("b")
        let c = try node("c")
        let id = try a.createSession()
        let (conn, events) = try c.stream(id)
        defer { conn.close() }
        _ = try events.next()  // snapshot
        let r = try name(b, id, "bob")
        XCTAssertEqual(r.status, 202, "\(r)")
        XCTAssertEqual(inputSeq(r), 1)
        XCTAssertEqual(inputSeq(try greet(c, id)), 2)
        // Acknowledged means committed: every node reads it at once, the owner (A) kept running it.
        XCTAssertEqual(try label(a, id), "Hello, BOB!")
        XCTAssertEqual(try b.state(id), try c.state(id))
        XCTAssertEqual(try events.next(until: "greeting").last?.id, String((1 << 32) + 1))
        let e = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(e.id, String((1 << 32) + 2), "no takeover: still token 1")
        XCTAssertEqual(try JSONValue.parse(e.data)["outputs"]?["label"], "Hello, BOB!")
        // The owner's answers travel back unchanged: a refusal, and an idempotent retry through B.
        XCTAssertEqual(try b.post(id, "greeting", "nope").status, 404)
        XCTAssertEqual(inputSeq(try name(b, id, "cy", key: "k")), 3)
        XCTAssertEqual(inputSeq(try name(c, id, "cy", key: "k")), 3)
        XCTAssertEqual(inputSeq(try name(a, id, "cy", key: "k")), 3)
        XCTAssertEqual(inputSeq(try greet(a, id)), 4)
        XCTAssertTrue(try metrics(b).contains("bff_cluster_inputs_owned_elsewhere_total 3"))
        XCTAssertTrue(try metrics(a).contains("bff_cluster_takeovers_total 0"))
    }

    func testAStreamOnAnotherNodeSeesTheOwnersEventsWithTheStoredIdsAndReplaysFromLastEventID() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        let snapshot = try XCTUnwrap(events.next())
        XCTAssertEqual(snapshot.event, "snapshot")
        XCTAssertEqual(snapshot.id, "0")
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let e1 = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(e1.id, String((1 << 32) + 1))
        XCTAssertEqual(try JSONValue.parse(e1.data)["outputs"]?["buttonEnabled"], true)
        XCTAssertEqual(try greet(a, id).status, 202)
        let e2 = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(e2.id, String((1 << 32) + 2))
        XCTAssertEqual(try JSONValue.parse(e2.data)["outputs"]?["label"], "Hello, ANN!")
        // A client reconnecting to a third place with the first id gets exactly the missed event.
        let (conn2, replay) = try a.stream(id, lastEventID: e1.id)
        defer { conn2.close() }
        let missed = try XCTUnwrap(replay.next())
        XCTAssertEqual(missed.id, e2.id)
        XCTAssertEqual(missed.data, e2.data)
    }

    /// A stream on the loop running the session is fed by that loop's commits, with the stored ids and
    /// without a subscription to the session's channel; once the session is taken over elsewhere, the same
    /// stream follows the new owner through Redis: caught up from the history, then live, nothing
    /// missed or repeated.
    func testAStreamAtTheOwnerIsFedByItsCommitsAndFollowsATakeoverThroughRedis() throws {
        // One loop: the stream is on the session's loop (streams on A's other loops follow the channel).
        let a = try node("a", leaseTTL: 30, threads: 1)  // renews every 10 s: learns of the takeover when fenced
        let b = try node("b", leaseTTL: 30)
        let id = try a.createSession()
        let channel = "bff:s:{\(id)}:ch"
        let (conn, events) = try a.stream(id)
        defer { conn.close() }
        XCTAssertEqual(try XCTUnwrap(events.next()).event, "snapshot")
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let e1 = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(e1.id, String((1 << 32) + 1))
        XCTAssertEqual(try redisCLI("PUBSUB", "SHARDNUMSUB", channel), "\(channel)\n0\n", "fed by A's own commits")
        // A paused past its lease (simulated: the lease key disappears); B takes over with token 2.
        _ = try redisCLI("HDEL", "bff:s:{\(id)}", "lease")
        XCTAssertEqual(try name(b, id, "bob").status, 202)
        XCTAssertEqual(try greet(b, id).status, 202)
        XCTAssertEqual(try greet(a, id).status, 503, "A's commit is fenced: the session leaves A")
        // B's name input changed no output; its greet is B's first event: A's stream reads it from the history.
        let e2 = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(e2.id, String((2 << 32) + 1))
        XCTAssertEqual(try JSONValue.parse(e2.data)["outputs"]?["label"], "Hello, BOB!")
        XCTAssertEqual(try redisCLI("PUBSUB", "SHARDNUMSUB", channel), "\(channel)\n1\n", "A now subscribes")
        XCTAssertEqual(try name(b, id, "cy").status, 202)
        XCTAssertEqual(try greet(b, id).status, 202)
        let e3 = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(e3.id, String((2 << 32) + 2), "then B's events live, none missed or repeated")
        XCTAssertEqual(try JSONValue.parse(e3.data)["outputs"]?["label"], "Hello, CY!")
    }

    /// A stream on a node that does not run its session, whose reader does not read, falls behind: its
    /// state frames are coalesced, and once the reader reads again the stream is caught up with a fresh
    /// snapshot loaded from the store (its `ClusterStream`, the sink's external feed), then goes on live.
    func testASlowReaderElsewhereIsCoalescedAndCaughtUpWithAFreshSnapshotFromTheStore() throws {
        let a = try node(
            "a",
            configure: {
                $0.inputRate = 1_000_000
                $0.inputBurst = 1_000_000
            })
        let b = try node("b", configure: { $0.streamHighWaterBytes = 16 * 1024 })
        let id = try a.createSession()
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        XCTAssertEqual(try XCTUnwrap(events.next()).event, "snapshot")
        // ~9.6 MB of states (each greet a new 16 KB label) the reader does not read: more than the sockets
        // between them hold.
        let long = String(repeating: "x", count: 16_000)
        let poster = try WireConnection(port: a.port)
        defer { poster.close() }
        let rounds = 600
        for i in 0..<rounds {
            XCTAssertEqual(try a.post(id, "greeting", "name", #"{"value":"\#(long)\#(i)"}"#, on: poster).status, 202)
            XCTAssertEqual(try a.post(id, "greeting", "greet", on: poster).status, 202)
        }
        XCTAssertEqual(try a.post(id, "greeting", "name", #"{"value":"zed"}"#, on: poster).status, 202)
        XCTAssertEqual(try a.post(id, "greeting", "greet", on: poster).status, 202)
        try waitUntil("B coalesced state frames", within: 10) {
            let lines = try self.metrics(b).split(separator: "\n")
            let line = lines.first { $0.hasPrefix("bff_coalesced_state_frames_total ") }
            return (line.flatMap { Double($0.split(separator: " ")[1]) } ?? 0) > 0
        }
        var read = 0
        var freshSnapshots = 0
        var converged = false
        while !converged, let e = try events.next(timeout: 20) {
            read += 1
            let data = try JSONValue.parse(e.data)
            if e.event == "snapshot" {
                freshSnapshots += 1
                converged = data["viewModels"]?["greeting"]?["label"] == "Hello, ZED!"
            } else if e.event == "greeting" {
                converged = data["outputs"]?["label"] == "Hello, ZED!"
            }
        }
        XCTAssertTrue(converged, "the stream reached the final state (\(read) events read)")
        XCTAssertGreaterThanOrEqual(freshSnapshots, 1, "caught up with a fresh snapshot from the store")
        XCTAssertLessThan(read, rounds, "intermediate states were skipped")
        XCTAssertEqual(try label(b, id), "Hello, ZED!")
        // Live again: the next event comes as it happens.
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        XCTAssertEqual(try greet(a, id).status, 202)
        let live = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(try JSONValue.parse(live.data)["outputs"]?["label"], "Hello, ANN!")
    }

    /// A stream whose subscription Redis never confirms (here the ACL refuses the session's channel: the
    /// subscriber connection is dropped and re-made, and refused again) gets `503` problem JSON at its
    /// start deadline instead of waiting without an answer, gives its place in the stream limit back,
    /// and the node serves on once the channel is allowed again.
    /// A node that streams a session it does not run subscribes to the session's channel once for all its
    /// streams on a loop; each stream that closes gives its place in the cluster-wide stream count back,
    /// and the last one unsubscribes the loop. A later stream subscribes again and is fed.
    func testTheLastStreamOfASessionOnALoopUnsubscribesAndEachGivesItsPlaceBack() throws {
        let a = try node("a")
        let b = try node("b", threads: 1)  // both streams on B's one loop: one subscription for them
        let id = try a.createSession()
        let channel = "bff:s:{\(id)}:ch"
        let streamsKey = "bff:s:{\(id)}:streams"
        func subscribers() throws -> String { try redisCLI("PUBSUB", "SHARDNUMSUB", channel) }
        let (first, firstEvents) = try b.stream(id)
        defer { first.close() }
        XCTAssertEqual(try XCTUnwrap(firstEvents.next()).event, "snapshot")
        let (second, secondEvents) = try b.stream(id)
        defer { second.close() }
        XCTAssertEqual(try XCTUnwrap(secondEvents.next()).event, "snapshot")
        XCTAssertEqual(try subscribers(), "\(channel)\n1\n", "one subscription for the loop's two streams")
        XCTAssertEqual(try redisCLI("ZCARD", streamsKey), "2\n")
        first.close()
        try waitUntil("the first stream's place is given back", within: 5) {
            try self.redisCLI("ZCARD", streamsKey) == "1\n"
        }
        XCTAssertEqual(try subscribers(), "\(channel)\n1\n", "the other stream still needs the channel")
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        let fed = try XCTUnwrap(secondEvents.next(until: "greeting").last, "the remaining stream is still fed")
        XCTAssertEqual(try JSONValue.parse(fed.data)["outputs"]?["buttonEnabled"], true)
        second.close()
        try waitUntil("the last stream unsubscribes the loop", within: 5) {
            try subscribers() == "\(channel)\n0\n" && self.redisCLI("ZCARD", streamsKey) == "0\n"
        }
        let (third, thirdEvents) = try b.stream(id)
        defer { third.close() }
        XCTAssertEqual(try XCTUnwrap(thirdEvents.next()).event, "snapshot")
        XCTAssertEqual(try subscribers(), "\(channel)\n1\n", "a new stream subscribes again")
        XCTAssertEqual(try greet(a, id).status, 202)
        XCTAssertNotNil(try thirdEvents.next(until: "greeting").last, "and is fed")
    }

    func testAStreamWhoseSubscriptionNeverConfirmsIsAnswered503AtItsDeadline() throws {
        let a = try node("a")
        let b = try node("b", commandTimeout: 0.5)  // start deadline 2 × 0.5 + 1 = 2 s
        let id = try a.createSession()  // A runs it: A's own streams need no subscription, B's do
        _ = try redisCLI(
            "ACL", "SETUSER", "default", "resetchannels", "&bff:in:*", "&bff:reply:*", "&bff:cwake:*",
            "&bff:status:*", "&__sentinel__:*")  // the sentinels' hello channel, where there are sentinels
        let started = Date()
        let refused = try WireConnection.get(port: b.port, path: "/api/sessions/\(id)/events")
        XCTAssertTrue(refused.problem(503).contains("unavailable"), refused.problem(503))
        XCTAssertNotNil(refused.header("Retry-After"))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.9, "answered at the deadline")
        _ = try redisCLI("ACL", "SETUSER", "default", "allchannels")
        XCTAssertEqual(try redisCLI("ZCARD", "bff:s:{\(id)}:streams"), "0\n", "its place was given back")
        try waitUntil("B's subscriber is back", within: 10) {
            (try? WireConnection.get(port: b.port, path: "/readyz").status) == 200
        }
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        XCTAssertEqual(try XCTUnwrap(events.next()).event, "snapshot", "the next stream starts")
    }

    func testShutdownHandsTheSessionOverAtOnceAndTheNextNodeContinuesWithTheStateAndLaterIds() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        XCTAssertEqual(try greet(a, id).status, 202)
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        _ = try events.next()  // snapshot
        let started = Date()
        a.app.shutdown()  // SIGTERM's path: leases released before the server stops
        let r = try name(b, id, "bob")
        XCTAssertEqual(r.status, 202, "hand-over: no waiting for the lease TTL")
        XCTAssertLessThan(Date().timeIntervalSince(started), 2 + a.app.configuration.shutdownGracePeriod)
        XCTAssertEqual(inputSeq(r), 3, "inputSeq continues")
        XCTAssertEqual(inputSeq(try greet(b, id)), 4)
        let e = try XCTUnwrap(events.next(until: "greeting").last)
        XCTAssertEqual(e.id, String((2 << 32) + 1), "the new owner's ids start in its token's range")
        XCTAssertEqual(try JSONValue.parse(e.data)["outputs"]?["label"], "Hello, BOB!")
        XCTAssertEqual(try label(b, id), "Hello, BOB!")
        XCTAssertTrue(try metrics(b).contains("bff_cluster_takeovers_total 1"))
        // A's server is stopped: its registry is read directly.
        XCTAssertTrue(
            String(decoding: a.app.metrics.render(), as: UTF8.self).contains("bff_cluster_hand_overs_total 1"))
        XCTAssertTrue(try metrics(b).contains("bff_cluster_hand_overs_total 0"))
    }

    func testAKilledOwnersSessionIsTakenOverWithinTheLeaseTTLWithItsState() throws {
        let ttl = 1.0
        let a = try node("a", leaseTTL: ttl)
        let b = try node("b", leaseTTL: ttl)
        let id = try a.createSession()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        XCTAssertEqual(try greet(a, id).status, 202)
        // "kill -9" in process: the loops stop; nothing renews or releases the lease.
        a.app.server.shutdown(gracePeriod: 0)
        let killed = Date()
        var answer: WireResponse?
        try waitUntil("takeover", within: ttl + 2) {
            let r = try name(b, id, "bob")
            if r.status == 503 { return false }
            answer = r
            return true
        }
        XCTAssertEqual(answer?.status, 202)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(killed), ttl * 0.5)
        XCTAssertEqual(answer.flatMap(inputSeq), 3)
        XCTAssertEqual(try label(b, id), "Hello, ANN!", "the state from before the crash is kept")
        XCTAssertEqual(inputSeq(try greet(b, id)), 4)
        XCTAssertEqual(try label(b, id), "Hello, BOB!")
    }

    func testASearchLoadingWhenItsOwnerDiedIsIssuedAgainByTheNodeThatTakesOver() throws {
        let ttl = 1.0
        let a = try node("a", leaseTTL: ttl, search: HangingSearch())
        let b = try node("b", leaseTTL: ttl, search: AnsweringSearch(total: 7))
        let id = try a.createSession()
        XCTAssertEqual(try a.post(id, "search", "query", #"{"value":"swift"}"#).status, 202)
        XCTAssertEqual(try a.post(id, "search", "submit").status, 202)
        XCTAssertEqual(try b.state(id)["viewModels"]?["search"]?["totalCount"], JSONValue.null)
        a.app.server.shutdown(gracePeriod: 0)  // dies with its search under way
        try waitUntil("takeover by B's next input", within: ttl + 2) { try name(b, id, "bob").status == 202 }
        try waitUntil("the restored search answered on B", within: 5) {
            try b.state(id)["viewModels"]?["search"]?["totalCount"] == 7
        }
    }

    func testAnOrphanedSessionWithAStreamElsewhereIsTakenOverWithoutARequest() throws {
        let ttl = 1.0
        let a = try node("a", leaseTTL: ttl, search: HangingSearch())
        let b = try node("b", leaseTTL: ttl, search: AnsweringSearch(total: 9))
        let id = try a.createSession()
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        _ = try events.next()  // snapshot
        XCTAssertEqual(try a.post(id, "search", "query", #"{"value":"swift"}"#).status, 202)
        XCTAssertEqual(try a.post(id, "search", "submit").status, 202)
        a.app.server.shutdown(gracePeriod: 0)  // dies with its search under way; nobody sends a request
        let deadline = Date().addingTimeInterval(ttl + 2 + ttl)  // expiry + bound + one check interval
        var total: JSONValue?
        while total != 9, Date() < deadline {
            guard let e = try events.next(timeout: max(0.1, deadline.timeIntervalSinceNow)), e.event == "search" else {
                continue
            }
            if let t = try JSONValue.parse(e.data)["outputs"]?["totalCount"] { total = t }
        }
        XCTAssertEqual(total, 9, "B took the session over and its restored search answered")
        XCTAssertEqual(try b.state(id)["viewModels"]?["search"]?["totalCount"], 9)
    }

    func testDeleteAtANonOwnerIsForwardedAndEndsTheStreamsOnEveryNode() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        let (connA, onA) = try a.stream(id)
        let (connB, onB) = try b.stream(id)
        defer {
            connA.close()
            connB.close()
        }
        _ = try onA.next()
        _ = try onB.next()
        let r = try WireConnection(port: b.port).request("DELETE", "/api/sessions/\(id)")
        XCTAssertEqual(r.status, 204, "\(r)")
        for events in [onA, onB] {
            let end = try XCTUnwrap(events.next(until: "end").last)
            XCTAssertEqual(try JSONValue.parse(end.data), ["reason": "deleted"])
        }
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/sessions/\(id)/state").status, 404)
        XCTAssertEqual(try name(b, id, "x").status, 404)
        XCTAssertEqual(try WireConnection(port: a.port).request("DELETE", "/api/sessions/\(id)").status, 404)
    }

    /// Time has to pass for this one: the session is watched on B, idle for twice its idle time-out.
    func testASessionStreamedOnAnotherNodeDoesNotExpireWhileItIsWatched() throws {
        let a = try node("a", idleTimeout: 1)
        let b = try node("b", idleTimeout: 1)
        let id = try a.createSession()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        XCTAssertEqual(try greet(a, id).status, 202)
        let (conn, events) = try b.stream(id)
        defer { conn.close() }
        _ = try events.next()  // snapshot
        usleep(2_500_000)
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/api/sessions/\(id)/state").status, 200)
        XCTAssertEqual(try label(b, id), "Hello, ANN!")
        XCTAssertEqual(try name(b, id, "bob").status, 202)
        XCTAssertEqual(try greet(a, id).status, 202)
        XCTAssertEqual(try events.next(until: "greeting").last?.event, "greeting", "the stream is still live")
        conn.close()
        try waitUntil("expired once nobody watches", within: 4) {
            try WireConnection.get(port: a.port, path: "/api/sessions/\(id)/state").status == 404
        }
    }

    /// An owner's commits renew the session's expiry in Redis (`EXPIRE` of the hash and the history) with
    /// the first commit and then once per renewal interval (a tenth of the idle time-out, at most 60 s, on
    /// the session clock), not with every input: two writes fewer per input for Redis. Every renewal gives
    /// the idle time-out plus that interval, so the expiry never comes sooner than the idle time-out after
    /// the last input.
    func testTheOwnersCommitsRenewTheExpiryOncePerRenewalInterval() throws {
        let time = SessionClockTests.ManualTime()
        let a = try node("a", clock: time.clock, configure: { $0.unusedSessionTimeout = 1800 })
        let id = try a.createSession()
        let before = try calls("expire")
        for i in 1...5 { XCTAssertEqual(try name(a, id, "n\(i)").status, 202) }
        XCTAssertEqual(try calls("expire") - before, 2, "the first commit renews hash and history, no other")
        time.advance(59)
        XCTAssertEqual(try name(a, id, "later").status, 202)
        XCTAssertEqual(try calls("expire") - before, 2, "59 s after the renewal: not due yet")
        time.advance(1)
        XCTAssertEqual(try name(a, id, "due").status, 202)
        XCTAssertEqual(try calls("expire") - before, 4, "60 s after it: renewed again")
        let ttl = Int(try redisCLI("TTL", "bff:s:{\(id)}").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        XCTAssertGreaterThan(ttl, 1800, "idle time-out plus the renewal interval: \(ttl)")
        XCTAssertEqual(inputSeq(try name(a, id, "last")), 8, "every input applied once")
    }

    func testAZombieOwnerCannotCommitAfterBeingTakenOver() throws {
        let a = try node("a", leaseTTL: 30)  // renews every 10 s: it will not notice in time
        let b = try node("b", leaseTTL: 30)
        let id = try a.createSession()
        XCTAssertEqual(try name(a, id, "ann").status, 202)
        // A was paused long enough for its lease to expire (simulated: the lease key disappears).
        _ = try redisCLI("HDEL", "bff:s:{\(id)}", "lease")
        XCTAssertEqual(try name(b, id, "bob").status, 202)  // B takes over (token 2)
        XCTAssertEqual(inputSeq(try greet(b, id)), 3)
        let zombie = try greet(a, id)
        XCTAssertEqual(zombie.status, 503, "A's commit carries token 1: fenced")
        XCTAssertEqual(try label(a, id), "Hello, BOB!")
        XCTAssertEqual(try label(b, id), "Hello, BOB!")
        XCTAssertEqual(try b.state(id)["seq"]?.intValue, (2 << 32) + 1, "nothing of A's after the takeover")
        XCTAssertTrue(try metrics(a).contains("bff_cluster_fenced_total 1"))
        XCTAssertTrue(try metrics(a).contains(#"bff_sessions_ended_total{reason="moved"} 1"#))
    }

    func testReadinessFollowsRedis() throws {
        let a = try node("a")
        XCTAssertEqual(try WireConnection.get(port: a.port, path: "/readyz").status, 200)
        redis.kill()
        try waitUntil("503 while Redis is down", within: 10) {
            (try? WireConnection.get(port: a.port, path: "/readyz").status) == 503
        }
        let errors = sample(try metrics(a), "bff_redis_errors_total")
        let r = try WireConnection.post(port: a.port, path: "/api/sessions", body: [])
        XCTAssertEqual(r.status, 503)
        XCTAssertNotNil(r.header("Retry-After"))
        // Two Redis calls failed for it: the client's count across the cluster (admitted on this node's own
        // limits) and the creation itself (refused).
        XCTAssertEqual(sample(try metrics(a), "bff_redis_errors_total"), errors + 2, "the refused create counted")
        try redis.start()
        try waitUntil("ready again", within: 10) {
            (try? WireConnection.get(port: a.port, path: "/readyz").status) == 200
        }
        XCTAssertEqual(try WireConnection.post(port: a.port, path: "/api/sessions", body: []).status, 201)
        XCTAssertGreaterThan(sample(try metrics(a), "bff_redis_round_trip_count"), 0, "round trips timed")
    }

    /// The value of the sample `name` (with its labels) in a `/metrics` text; 0 when absent.
    func sample(_ text: String, _ name: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1)) ?? -1
        }
        return 0
    }
}

/// A search that never answers (until cancelled): the owner dies while it is under way.
struct HangingSearch: RepositorySearching {
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        try? await Task.sleep(nanoseconds: 60_000_000_000)
        throw .upstream(message: "cancelled")
    }
}

/// A search that answers at once with an empty page of `total` results.
struct AnsweringSearch: RepositorySearching {
    let total: Int
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        SearchResponse(
            page: SearchPage(totalCount: total, incompleteResults: false, repositories: [], page: 1, hasMore: false),
            cache: .miss)
    }
}
