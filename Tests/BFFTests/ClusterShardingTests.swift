import EventHTTP
import Foundation
import JSON
import RedisClient
import RedisTestSupport
import WireClient
import XCTest

@testable import BFF

/// How sessions use a Redis Cluster, on the shared real one (3 masters, 3 replicas) with three
/// in-process nodes: sessions spread evenly over the masters (their keys really are there), and a
/// session's events and forwarded inputs travel on sharded channels of its own master only
/// (`PUBSUB SHARDCHANNELS`), with no classic channel left.
final class ClusterShardingTests: ClusterTestCase {
    override class var deployment: RedisDeployment { .cluster }

    /// The session hashes (`bff:s:{id}`) stored on the master on `port` (`SCAN`, that node only).
    func sessionHashes(on port: Int) throws -> Set<String> {
        let keys = try runCLI(port: port, ["--scan", "--pattern", "bff:s:*"])
        return Set(keys.split(separator: "\n").map(String.init).filter { $0.hasSuffix("}") })
    }

    func testSessionsSpreadEvenlyOverTheMasters() throws {
        let nodes = try (0..<3).map { try node("n\($0)") }
        let ids = try (0..<300).map { try nodes[$0 % 3].createSession() }
        let masters = try masterPorts()
        XCTAssertEqual(masters.count, 3)
        let map = try SharedRedis.cluster().slotMap()
        var total = 0
        for m in masters {
            let here = try sessionHashes(on: m)
            total += here.count
            // 100 expected on each (binomial, n 300, p 1/3: standard deviation 8.2): 70...130 is ±3.7 σ.
            XCTAssertTrue((70...130).contains(here.count), "master \(m) stores \(here.count) of 300 sessions")
            for key in here {
                let id = String(key.dropFirst("bff:s:{".count).dropLast())
                XCTAssertEqual(
                    map.first { $0.slots.contains(RedisSlot.of(id)) }?.port, m, "\(id) lives where its slot is")
            }
        }
        XCTAssertEqual(total, ids.count, "every session stored once")
    }

    func testASessionsEventsAndForwardedInputsTravelOnShardChannelsOfItsOwnMaster() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()  // A runs it: takes its inputs on A's input channel on its master
        let own = try masterPort(of: "{\(id)}")
        let (conn, events) = try b.stream(id)  // B subscribes to its event channel
        defer { conn.close() }
        XCTAssertEqual(try XCTUnwrap(events.next()).event, "snapshot")
        let shardChannels = { (port: Int) throws -> Set<String> in
            Set(
                try self.runCLI(port: port, ["PUBSUB", "SHARDCHANNELS", "bff:s:{\(id)}*"]).split(separator: "\n").map(
                    String.init))
        }
        XCTAssertEqual(try shardChannels(own), ["bff:s:{\(id)}:ch"])
        // A's inputs come on A's (the lease holder's) input channel of the session's master: one channel
        // for all of A's sessions there, none per session.
        let inputs = try XCTUnwrap(a.app.backend as? ClusterNode).inputChannel(id)
        XCTAssertTrue(inputs.hasPrefix("bff:in:{"), inputs)
        XCTAssertEqual(
            try runCLI(port: own, ["PUBSUB", "SHARDCHANNELS", inputs]).trimmingCharacters(in: .whitespacesAndNewlines),
            inputs)
        for m in try masterPorts() where m != own {
            XCTAssertEqual(try shardChannels(m), [], "master \(m) carries nothing of the session")
        }
        // An input at A reaches B's stream through the shard channel; an input at B is forwarded to A
        // through the other one.
        XCTAssertEqual(try a.post(id, "search", "query", #"{"value":"one"}"#).status, 202)
        XCTAssertEqual(try JSONValue.parse(try XCTUnwrap(events.next(until: "search").last).data)["inputSeq"], 1)
        let forwarded = try b.post(id, "search", "query", #"{"value":"two"}"#)
        XCTAssertEqual(forwarded.status, 202)
        XCTAssertEqual(try JSONValue.parse(try XCTUnwrap(events.next(until: "search").last).data)["inputSeq"], 2)
        // Nothing of cluster mode uses a classic channel that every Redis node would relay (the search
        // cache's rare wake-ups are a pattern, `PUBSUB NUMPAT`).
        for port in try SharedRedis.cluster().nodes.map(\.port) {
            XCTAssertEqual(
                try runCLI(port: port, ["PUBSUB", "CHANNELS", "bff:*"]), "\n", "no classic channel on \(port)")
        }
    }
}
