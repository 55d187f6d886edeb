import Foundation
import JSON
import RedisClient

/// What `bff session-owner` found, from the replies to HGET session lease, PTTL of the lease holder's
/// liveness key (-2 if none), HMGET session, TTL session, ZRANGE streams WITHSCORES and TIME (in that
/// order). A lease whose holder's liveness key is gone is held by nobody.
struct SessionOwnerReport {
    let id: String
    let exists: Bool
    /// `holder|token` split: holder `node#nonce#loop`.
    let holder: String?
    let token: Int64?
    let leaseMilliseconds: Int64?
    let seq: Int64?
    let inputSeq: Int64?
    let fence: Int64?
    let sessionSeconds: Int64?
    /// Open streams: member `<holder>/<n>` and milliseconds until its deadline.
    let streams: [(member: String, milliseconds: Int64)]

    init(id: String, replies r: [RESPValue]) {
        self.id = id
        let live = r[1].int ?? -2
        let lease = live == -2 ? nil : r[0].string
        if let lease, let bar = lease.lastIndex(of: "|") {
            holder = String(lease[..<bar])
            token = Int64(lease[lease.index(after: bar)...])
        } else {
            (holder, token) = (lease, nil)
        }
        leaseMilliseconds = lease == nil ? nil : live
        let fields = r[2].array ?? []
        seq = fields.first?.int
        inputSeq = fields.count > 1 ? fields[1].int : nil
        fence = fields.count > 2 ? fields[2].int : nil
        exists = seq != nil || fence != nil
        let ttl = r[3].int ?? -2
        sessionSeconds = ttl >= 0 ? ttl : nil
        let time = r[5].array ?? []
        let nowMs = (time.first?.int ?? 0) * 1000 + (time.count > 1 ? (time[1].int ?? 0) / 1000 : 0)
        var streams: [(String, Int64)] = []
        let z = r[4].array ?? []
        var i = 0
        while i + 1 < z.count {
            let deadline = Int64(Double(z[i + 1].string ?? "") ?? 0)
            if let member = z[i].string, deadline > nowMs { streams.append((member, deadline - nowMs)) }
            i += 2
        }
        self.streams = streams
    }

    /// The node id in a holder name `node#nonce#loop` (a node id may itself contain '#').
    static func node(of holder: String) -> String {
        let parts = holder.split(separator: "#", omittingEmptySubsequences: false)
        return parts.count >= 3 ? parts.dropLast(2).joined(separator: "#") : holder
    }

    var owner: String? { holder.map(Self.node(of:)) }

    var text: String {
        guard exists else { return "no session '\(id)' in Redis (never created, expired or deleted)" }
        var lines: [String] = []
        if let holder, let owner {
            let left = leaseMilliseconds.map { String(format: "%.2f s", Double($0) / 1000) } ?? "?"
            lines.append(
                "session \(id): owner \(owner) (lease holder \(holder), fencing token \(token.map(String.init) ?? "?"), lease expires in \(left))"
            )
        } else {
            lines.append(
                "session \(id): no owner (its holder stopped renewing, or released it; the next request, or a node streaming it, takes it over)"
            )
        }
        let idle = sessionSeconds.map { "\($0) s" } ?? "never"
        lines.append(
            "  stored: seq \(seq.map(String.init) ?? "?"), inputSeq \(inputSeq.map(String.init) ?? "?"), fence \(fence.map(String.init) ?? "?"), idle expiry in \(idle)"
        )
        lines.append("  open event streams: \(streams.count)")
        for (member, ms) in streams {
            let holder = String(member.prefix { $0 != "/" })
            lines.append(
                "    on \(Self.node(of: holder)) (\(member), counted until \(String(format: "%.1f", Double(ms) / 1000)) s from now)"
            )
        }
        return lines.joined(separator: "\n")
    }

    var json: String {
        var o: JSONObject = ["id": .string(id), "exists": .bool(exists)]
        o["owner"] = owner.map(JSONValue.string) ?? .null
        o["leaseHolder"] = holder.map(JSONValue.string) ?? .null
        o["fencingToken"] = token.map { .int(Int($0)) } ?? .null
        o["leaseExpiresInMs"] = leaseMilliseconds.map { .int(Int($0)) } ?? .null
        o["seq"] = seq.map { .int(Int($0)) } ?? .null
        o["inputSeq"] = inputSeq.map { .int(Int($0)) } ?? .null
        o["sessionExpiresInSeconds"] = sessionSeconds.map { .int(Int($0)) } ?? .null
        o["streams"] = .array(
            streams.map { member, ms in
                let holder = String(member.prefix { $0 != "/" })
                return .object([
                    "node": .string(Self.node(of: holder)), "member": .string(member), "countedForMs": .int(Int(ms)),
                ])
            })
        return String(decoding: JSONValue.object(o).bytes, as: UTF8.self)
    }
}
