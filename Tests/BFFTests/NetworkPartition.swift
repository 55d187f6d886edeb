import Foundation
import Glibc
import RedisTestSupport

/// A network namespace for one `bff` node, joined to the test's (root) namespace by two veth pairs: one
/// for its Redis traffic, one for its clients, so that the Redis link can be cut (`ip link set … down`)
/// while clients still reach the node. Needs root and `ip netns` (`make` throws otherwise: the test skips
/// with the reason).
///
/// Threading: the test's thread.
final class NetworkPartition {
    let namespace: String
    /// The root side's address on the Redis link (Redis binds it) and the node's address for clients.
    let redisAddress: String
    let nodeAddress: String
    private let redisLink: String
    private let clientLink: String

    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Creates the namespace and both links, up.
    init() throws {
        guard geteuid() == 0, Self.ip != nil else { throw Unavailable(description: "needs root and ip(8)") }
        let tag = String(UInt32.random(in: 0...UInt32.max) % 1_000_000, radix: 36)
        let net = Int.random(in: 20...250)
        let sub = Int.random(in: 0...120) * 2
        namespace = "bffpart-\(tag)"
        redisLink = "bp\(tag)r"
        clientLink = "bp\(tag)c"
        redisAddress = "10.\(net).\(sub).1"
        nodeAddress = "10.\(net).\(sub + 1).2"
        let nodeRedisSide = "10.\(net).\(sub).2"
        let rootClientSide = "10.\(net).\(sub + 1).1"
        do {
            try Self.run(["netns", "add", namespace])
            try Self.run(["netns", "exec", namespace, Self.ip!, "link", "set", "lo", "up"])
            for (link, root, node) in [
                (redisLink, redisAddress, nodeRedisSide), (clientLink, rootClientSide, nodeAddress),
            ] {
                try Self.run(["link", "add", link + "0", "type", "veth", "peer", "name", link + "1"])
                try Self.run(["link", "set", link + "1", "netns", namespace])
                try Self.run(["addr", "add", root + "/24", "dev", link + "0"])
                try Self.run(["link", "set", link + "0", "up"])
                try Self.run(["netns", "exec", namespace, Self.ip!, "addr", "add", node + "/24", "dev", link + "1"])
                try Self.run(["netns", "exec", namespace, Self.ip!, "link", "set", link + "1", "up"])
            }
        } catch {
            remove()
            throw error
        }
    }

    /// The command line that runs `program arguments…` inside the namespace (`ip netns exec` execs it:
    /// the process is the program itself).
    func command(_ program: String, _ arguments: [String]) -> (String, [String]) {
        (Self.ip!, ["netns", "exec", namespace, program] + arguments)
    }

    /// Cuts (`false`) or restores (`true`) the node's link to Redis; its clients' link stays up.
    func redisLink(up: Bool) throws { try Self.run(["link", "set", redisLink + "0", up ? "up" : "down"]) }

    /// Deletes the links and the namespace.
    func remove() {
        for link in [redisLink, clientLink] { try? Self.run(["link", "del", link + "0"]) }
        try? Self.run(["netns", "del", namespace])
    }

    private static func run(_ arguments: [String]) throws {
        let r = try Spawn.run(ip ?? "/bin/ip", arguments)
        guard r.status == 0 else {
            throw Unavailable(description: "ip \(arguments.joined(separator: " ")): \(r.errorOutput)")
        }
    }
}
