import Foundation
import JSON
import XCTest

@testable import BFF

/// `Idempotency-Key` in cluster mode: where the node looks a key up. The run that created a session has seen
/// every key of it, so a browser's inputs (each with a key) cost one round trip, the commit; a run that took
/// the session from the store, or a session that forgot keys to make room, asks the store first, so a retry
/// is still applied once. Script calls are counted by the `GET`s Redis ran (`INFO commandstats`): the
/// lookup's `GET` of the key is the only one an input makes.
final class ClusterIdempotencyTests: ClusterTestCase {
    func testKeyedInputsToASessionCreatedHereAreNotLookedUpAndATakeoverLooksThemUp() throws {
        // Renewals (a `GET` of the lease each) every 10 s, the first 5-10 s after the creation: none in this test.
        let a = try node("a", leaseTTL: 30)
        let b = try node("b", leaseTTL: 30)
        let id = try a.createSession()
        let before = try calls("get")
        for k in 1...20 { XCTAssertEqual(inputSeq(try name(a, id, "n\(k)", key: "k\(k)")), k) }
        XCTAssertEqual(inputSeq(try name(a, id, "n3", key: "k3")), 3, "a retry: answered from A's memory")
        XCTAssertEqual(try calls("get") - before, 0, "no key looked up in Redis: A created the session")

        // A paused past its lease (simulated: the lease key disappears); B takes the session from the store.
        _ = try redisCLI("HDEL", "bff:s:{\(id)}", "lease")
        let taken = try calls("get")
        XCTAssertEqual(inputSeq(try name(b, id, "n7", key: "k7")), 7, "A's key, found in the store")
        XCTAssertEqual(inputSeq(try greet(b, id)), 21)
        XCTAssertEqual(try label(b, id), "Hello, N20!", "k7 was not applied again")
        XCTAssertEqual(inputSeq(try name(b, id, "x", key: "k21")), 22)
        XCTAssertEqual(inputSeq(try name(b, id, "x", key: "k21")), 22)
        // A lookup for each keyed input: B took the session over.
        XCTAssertEqual(try calls("get") - taken, 3)
    }

    /// An earlier run's keys expire a window after their commit, which came before the takeover: once a
    /// window has passed since it, the run that took the session over has seen every key the store holds.
    func testATakeoverStopsLookingKeysUpOnceAnIdempotencyWindowHasPassed() throws {
        let time = SessionClockTests.ManualTime()
        let a = try node("a", leaseTTL: 30)
        let b = try node("b", leaseTTL: 30, clock: time.clock)
        let id = try a.createSession()
        XCTAssertEqual(inputSeq(try name(a, id, "ann", key: "k1")), 1)
        _ = try redisCLI("HDEL", "bff:s:{\(id)}", "lease")
        let taken = try calls("get")
        XCTAssertEqual(inputSeq(try name(b, id, "bob", key: "k2")), 2)
        XCTAssertEqual(try calls("get") - taken, 1, "the lookup of k2")
        time.advance(300)
        let within = try calls("get")
        XCTAssertEqual(inputSeq(try name(b, id, "cy", key: "k3")), 3)
        XCTAssertEqual(try calls("get") - within, 1, "300 whole seconds may be 299.x: still looked up")
        time.advance(1)
        let after = try calls("get")
        XCTAssertEqual(inputSeq(try name(b, id, "dee", key: "k4")), 4)
        XCTAssertEqual(inputSeq(try name(b, id, "dee", key: "k4")), 4, "a retry, answered from B's memory")
        XCTAssertEqual(try calls("get") - after, 0, "a window has passed since the takeover: nothing looked up")
    }

    /// A key lives in Redis as long as in a session's memory: the configured window, not a constant.
    func testAKeyIsKeptInRedisForTheConfiguredWindow() throws {
        let a = try node("a", configure: { $0.idempotencyWindow = 60 })
        let id = try a.createSession()
        XCTAssertEqual(inputSeq(try name(a, id, "ann", key: "k")), 1)
        let ttl = try XCTUnwrap(
            Int(try redisCLI("TTL", "bff:s:{\(id)}:idem:k").trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertTrue((55...60).contains(ttl), "TTL \(ttl)")
    }

    /// A session keeps the last 1,024 keys of its window; once it forgot one, a key it does not remember may
    /// be in the store, and is looked up there until the forgotten key's window passed (in one process a
    /// forgotten key is applied again).
    func testASessionThatForgotAKeyToMakeRoomLooksKeysUpInTheStore() throws {
        let a = try node(
            "a", leaseTTL: 30,
            configure: { c in
                c.inputRate = 1_000_000
                c.inputBurst = 1_000_000
            })
        let id = try a.createSession()
        let cap = Session.rememberedKeys
        for k in 1...cap { XCTAssertEqual(inputSeq(try name(a, id, "n", key: "k\(k)")), k) }
        let full = try calls("get")
        XCTAssertEqual(inputSeq(try name(a, id, "n", key: "k1")), 1, "remembered: answered from memory")
        XCTAssertEqual(inputSeq(try name(a, id, "n", key: "new")), cap + 1, "k1, the oldest, is forgotten now")
        XCTAssertEqual(try calls("get") - full, 0, "none forgotten before this input: nothing looked up")
        let forgot = try calls("get")
        XCTAssertEqual(inputSeq(try name(a, id, "again", key: "k1")), 1, "found in the store: not applied again")
        XCTAssertEqual(
            inputSeq(try name(a, id, "n", key: "k2")), 2,
            "k2 is remembered, but looked up: a key of the window was forgotten")
        XCTAssertEqual(try calls("get") - forgot, 2)
        XCTAssertEqual(inputSeq(try greet(a, id)), cap + 2)
        XCTAssertEqual(try label(a, id), "Hello, N!")
    }
}
