import ClusterRedis
import RedisClient
import XCTest

/// Every key and channel name comes from `ClusterKeys` (the node's input and reply channels and the
/// status board included): the names docs/CLUSTER.md lists, all under the prefix, and a session's
/// names sharing its `{id}` hash tag (one Redis Cluster slot for a multi-key script), the cluster-wide
/// ones with tags of their own.
final class ClusterKeysTests: XCTestCase {
    func testTheNamesDocsClusterMdListsAllUnderThePrefix() {
        let k = ClusterKeys(prefix: "p")
        XCTAssertEqual(k.session("i"), "p:s:{i}")
        XCTAssertEqual(k.live(holder: "node#n#0", tag: "m0"), "p:live:{m0}:node#n#0")
        XCTAssertEqual(k.livePrefix(tag: "m7"), "p:live:{m7}:")
        XCTAssertEqual(k.events("i"), "p:s:{i}:ev")
        XCTAssertEqual(k.idempotency("i", "k"), "p:s:{i}:idem:k")
        XCTAssertEqual(k.streams("i"), "p:s:{i}:streams")
        XCTAssertEqual(k.channel("i"), "p:s:{i}:ch")
        XCTAssertEqual(k.inputs(holder: "node#n#0"), "p:in:{node#n#0}")
        XCTAssertEqual(k.replies("node#n#0"), "p:reply:{node#n#0}")
        XCTAssertEqual(k.status("github"), "p:status:{github}")
        XCTAssertEqual(k.rateLimit("gh"), "p:rl:{gh}")
        XCTAssertEqual(k.cacheEntry("q"), "p:c:{q}")
        XCTAssertEqual(k.cacheLock("q"), "p:c:{q}:lock")
        XCTAssertEqual(k.cacheWake("q"), "p:cwake:q")
        XCTAssertEqual(k.cacheWakePattern, "p:cwake:*")
    }

    func testASessionKeyWrittenAsAnArgumentHasTheBytesOfItsName() {
        let k = ClusterKeys(prefix: "bff")
        for id in ["i", "0123456789abcdef0123456789abcdef", "é✓"] {
            XCTAssertEqual(k.arg(id), RedisArg(k.session(id)))
            XCTAssertEqual(k.arg(id, .events), RedisArg(k.events(id)))
            XCTAssertEqual(k.arg(id, .idempotency, "key-1"), RedisArg(k.idempotency(id, "key-1")))
            XCTAssertEqual(k.arg(id, .idempotency), RedisArg(k.idempotency(id, "")))
            XCTAssertEqual(k.arg(id, .streams), RedisArg(k.streams(id)))
            XCTAssertEqual(k.arg(id, .channel), RedisArg(k.channel(id)))
        }
        XCTAssertEqual(k.arg("i", .events).bytes, Array("bff:s:{i}:ev".utf8))
    }

    /// A master's liveness tag is the first `m<n>` in a slot it serves: every node that knows the same slot
    /// map names the same key, and every slot has one.
    func testALiveTagIsTheFirstInASlotOfTheMaster() throws {
        XCTAssertEqual(ClusterKeys.liveTag { _ in true }, "m0")
        let slot = RedisSlot.of("m0")
        let other = try XCTUnwrap(ClusterKeys.liveTag { $0 != slot })
        XCTAssertNotEqual(RedisSlot.of(other), slot)
        XCTAssertEqual(other, "m1", "the next tag, unless it shares m0's slot")
        XCTAssertNil(ClusterKeys.liveTag { _ in false })
        let last = try XCTUnwrap(ClusterKeys.liveTag { $0 == 16383 })
        XCTAssertEqual(RedisSlot.of(last), 16383, "even a master with one slot has a tag")
    }
}
