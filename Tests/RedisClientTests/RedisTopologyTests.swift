import XCTest

@testable import RedisClient

/// The pure parts of routing: URLs, key slots, redirections, slot maps.
final class RedisTopologyTests: XCTestCase {
    func testURLsOfTheThreeTopologies() throws {
        let plain = try XCTUnwrap(RedisTopology(url: "redis://:pw@host:7000/2"))
        XCTAssertEqual(plain.kind, .standalone)
        XCTAssertEqual(plain.seeds, [RedisAddress(host: "host", port: 7000)])
        XCTAssertEqual(plain.node, RedisConfiguration(url: "redis://:pw@host:7000/2"))

        let sentinel = try XCTUnwrap(
            RedisTopology(url: "redis+sentinel://:p%40ss@s1:26380,s2,[::1]:26381/mymaster?db=3"))
        XCTAssertEqual(sentinel.kind, .sentinel(master: "mymaster"))
        XCTAssertEqual(
            sentinel.seeds,
            [
                RedisAddress(host: "s1", port: 26380), RedisAddress(host: "s2", port: 26379),
                RedisAddress(host: "::1", port: 26381),
            ])
        XCTAssertEqual(sentinel.node.password, "p@ss")
        XCTAssertEqual(sentinel.node.database, 3)
        XCTAssertEqual(sentinel.description, "redis+sentinel://:***@s1:26380,s2:26379,[::1]:26381/mymaster?db=3")
        XCTAssertEqual(sentinel.configuration(for: RedisAddress(host: "m", port: 6390)).port, 6390)
        XCTAssertEqual(sentinel.configuration(for: RedisAddress(host: "m", port: 6390)).password, "p@ss")

        let cluster = try XCTUnwrap(RedisTopology(url: "redis+cluster://10.0.0.1:7000,10.0.0.2:7001"))
        XCTAssertEqual(cluster.kind, .cluster)
        XCTAssertEqual(cluster.seeds.map(\.port), [7000, 7001])
        XCTAssertNil(cluster.node.password)
        XCTAssertEqual(RedisTopology(url: "redis+cluster://h")?.seeds, [RedisAddress(host: "h", port: 6379)])

        for bad in [
            "redis+sentinel://s1:26379", "redis+sentinel://s1:26379/", "redis+sentinel://s1:26379/m?x=1",
            "redis+sentinel://s1:26379/m?db=-1", "redis+cluster://h:7000/1", "redis+cluster://h:7000?db=1",
            "redis+cluster://", "redis+cluster://h:0", "redis+cluster://h:7000,,h2:7001",
            "redis+cluster://user:pw@h:7000", "rediss://h", "http://h",
        ] {
            XCTAssertNil(RedisTopology(url: bad), bad)
        }
    }

    /// Redis's own answers (`CLUSTER KEYSLOT`, the cluster spec's examples): hash tags, empty tags.
    func testKeySlotsMatchRedis() {
        XCTAssertEqual(RedisSlot.crc16(Array("123456789".utf8)[...]), 0x31C3, "the CRC16/XMODEM check value")
        XCTAssertEqual(RedisSlot.of("foo"), 12182)
        XCTAssertEqual(RedisSlot.of("{a}"), 15495)
        XCTAssertEqual(RedisSlot.of("{x}"), 16287)
        XCTAssertEqual(RedisSlot.of("{user1000}.following"), RedisSlot.of("user1000"))
        XCTAssertEqual(RedisSlot.of("bff:s:{abc}"), RedisSlot.of("bff:s:{abc}:ev"))
        XCTAssertEqual(
            RedisSlot.of("foo{}{bar}"), RedisSlot.of(Array("foo{}{bar}".utf8)), "an empty tag: the whole key")
        XCTAssertNotEqual(RedisSlot.of("foo{}{bar}"), RedisSlot.of("bar"))
        XCTAssertEqual(RedisSlot.of("foo{{bar}}zap"), RedisSlot.of("{bar"))
        XCTAssertEqual(RedisSlot.of("foo{bar}{zap}"), RedisSlot.of("bar"))
        XCTAssertEqual(RedisSlot.of(""), 0)
    }

    func testRedirections() {
        let from = RedisAddress(host: "10.0.0.9", port: 7000)
        XCTAssertEqual(
            RedisRedirect("MOVED 3999 127.0.0.1:6381", from: from),
            .moved(slot: 3999, to: RedisAddress(host: "127.0.0.1", port: 6381)))
        XCTAssertEqual(
            RedisRedirect("ASK 15495 127.0.0.1:31001", from: from),
            .ask(slot: 15495, to: RedisAddress(host: "127.0.0.1", port: 31001)))
        XCTAssertEqual(
            RedisRedirect("MOVED 1 :6390", from: from), .moved(slot: 1, to: RedisAddress(host: "10.0.0.9", port: 6390)))
        XCTAssertNil(RedisRedirect("MOVED 16384 h:1", from: from))
        XCTAssertNil(RedisRedirect("ERR wrong number of arguments", from: from))
        XCTAssertNil(RedisRedirect("READONLY You can't write against a read only replica.", from: from))
    }

    /// A `CLUSTER SHARDS` reply as Redis 7.0 sends it, including a failed master that was replaced (a
    /// shard of its own without slots) and a shard mid-failover (master failed, not replaced yet).
    func testSlotMapFromClusterShards() throws {
        func node(_ port: Int, _ role: String, _ health: String) -> RESPValue {
            .array(
                [
                    "id", "n\(port)", "port", "\(port)", "ip", "127.0.0.1", "endpoint", "127.0.0.1", "role", role,
                    "replication-offset", "10", "health", health,
                ].map { Int64($0).map(RESPValue.integer) ?? .bulkString(Array($0.utf8)) })
        }
        func shard(_ slots: [Int64], _ nodes: [RESPValue]) -> RESPValue {
            .array([
                .bulkString(Array("slots".utf8)), .array(slots.map { .integer($0) }),
                .bulkString(Array("nodes".utf8)), .array(nodes),
            ])
        }
        let reply = RESPValue.array([
            shard([0, 5460], [node(7001, "master", "online"), node(7004, "replica", "online")]),
            shard([5461, 10000, 10002, 10922], [node(7005, "replica", "online"), node(7002, "master", "online")]),
            shard([], [node(7003, "master", "fail")]),
            shard([10923, 16383], [node(7006, "master", "online")]),
        ])
        let map = try XCTUnwrap(RedisSlotMap.parse(shards: reply))
        let a = { RedisAddress(host: "127.0.0.1", port: $0) }
        XCTAssertEqual(map.masters, [a(7001), a(7002), a(7006)])
        XCTAssertEqual(map.master(ofSlot: 0), a(7001))
        XCTAssertEqual(map.master(ofSlot: 5461), a(7002))
        XCTAssertNil(map.master(ofSlot: 10001), "a hole")
        XCTAssertEqual(map.uncoveredSlots, 1)
        XCTAssertEqual(map.master(ofSlot: 16383), a(7006))
        XCTAssertEqual(map.replicas(of: a(7002)), [a(7005)])
        var patched = map
        patched.assign(slot: 10001, to: a(7009))
        XCTAssertEqual(patched.master(ofSlot: 10001), a(7009))
        XCTAssertEqual(patched.uncoveredSlots, 0)
        XCTAssertNil(RedisSlotMap.parse(shards: .array([.integer(1)])))

        let slots = RESPValue.array([
            .array([
                .integer(0), .integer(99), .array([.bulkString(Array("127.0.0.1".utf8)), .integer(7001)]),
                .array([.bulkString(Array("127.0.0.1".utf8)), .integer(7004)]),
            ]),
            .array([.integer(100), .integer(16383), .array([.bulkString(Array("127.0.0.1".utf8)), .integer(7002)])]),
        ])
        let fromSlots = try XCTUnwrap(RedisSlotMap.parse(slots: slots))
        XCTAssertEqual(fromSlots.master(ofSlot: 99), a(7001))
        XCTAssertEqual(fromSlots.master(ofSlot: 100), a(7002))
        XCTAssertEqual(fromSlots.replicas(of: a(7001)), [a(7004)])
    }
}
