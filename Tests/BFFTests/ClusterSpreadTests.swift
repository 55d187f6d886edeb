import Foundation
import RedisTestSupport
import WireClient
import XCTest

/// The periodic round trips a node makes per session — checks of the sessions it streams — are spread
/// over their interval instead of made together for sessions that started together (a burst of sessions
/// created, or taken over in a failover); lease renewals cost no round trip per session at all. Observed in Redis itself, with
/// `MONITOR` (Redis's own clock stamps every command).
final class ClusterSpreadTests: ClusterTestCase {
    /// One command `MONITOR` showed: Redis's time (s) and its arguments.
    struct Seen {
        let time: Double
        let args: [String]
    }

    /// Every command Redis runs for `seconds`, from `redis-cli monitor`.
    func monitor(for seconds: Double) throws -> [Seen] {
        // The observation window itself, not a synchronisation.
        let text = try Spawn.output(of: "/usr/bin/redis-cli", ["-p", "\(redis.port)", "monitor"], for: seconds)
        return text.split(separator: "\n").compactMap { line in
            // 1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "…" "1" "bff:s:{id}" …
            guard let time = Double(line.prefix { $0 != " " }), let bracket = line.firstIndex(of: "]") else {
                return nil
            }
            let args = line[line.index(after: bracket)...].split(separator: "\"").enumerated()
                .filter { $0.offset % 2 == 1 }.map { String($0.element) }
            return Seen(time: time, args: args)
        }
    }

    /// The largest number of `times` within any `window` seconds.
    func densest(_ times: [Double], window: Double) -> Int {
        let sorted = times.sorted()
        var best = 0
        var start = 0
        for (end, t) in sorted.enumerated() {
            while t - sorted[start] > window { start += 1 }
            best = max(best, end - start + 1)
        }
        return best
    }

    func testChecksOfStreamedSessionsAreSpreadAndLeasesRenewedWithoutACommandEach() throws {
        // Lease TTL 3 s: A renews every 1 s. B's idle time-out 4 s: B checks its streamed sessions every
        // 1 s, in 10 slices of 0.1 s.
        let a = try node("a", leaseTTL: 3, threads: 1)
        let b = try node("b", leaseTTL: 3, idleTimeout: 4, threads: 1)
        let count = 30
        let ids = try (0..<count).map { _ in try a.createSession() }  // within a few ms of each other
        var streams: [WireConnection] = []
        defer { for s in streams { s.close() } }
        for id in ids {
            let (conn, events) = try b.stream(id)
            _ = try events.next()  // snapshot: streamed on B
            streams.append(conn)
        }
        let seen = try monitor(for: 2.3)

        // A's renewals: `SET <prefix>:live:{tag}:<holder> 1 PX ms GET`, one per slice in which any of its
        // leases was renewed, however many: a lease is held while its holder's liveness key exists.
        let renewals = seen.filter { c in
            c.args.count == 6 && c.args[0] == "SET" && c.args[1].hasPrefix("bff:live:") && c.args[5] == "GET"
        }.map(\.time)
        // Any other script call (no input, no creation meanwhile) would be a lease renewed by itself.
        let others = seen.filter { c in
            c.args.first == "EVALSHA" && !(c.args.count >= 15 && c.args[11].hasSuffix(":streams"))
        }
        let checks = seen.flatMap { c -> [(time: Double, key: String)] in
            guard c.args.first == "EVALSHA", c.args.count >= 15, c.args[2] == "1", let n = Int(c.args[5]),
                c.args[11].hasSuffix(":streams")
            else { return [] }
            var sessions: [(time: Double, key: String)] = []
            var i = 9  // after the idle expiry, n, the liveness prefix, the stream-liveness key and ms
            for _ in 0..<n {
                guard i + 5 < c.args.count, let m = Int(c.args[i + 5]) else { return [] }
                sessions.append((c.time, c.args[i]))
                i += 6 + m
            }
            return sessions
        }
        for id in ids {
            XCTAssertGreaterThanOrEqual(
                checks.filter { $0.key.contains("{\(id)}") }.count, 2, "every streamed session checked every second")
        }
        // 30 leases renewed every second over 2.3 s: ~69 renewals, each at a random phase, arrive as at most
        // one SET per 0.1 s slice (≤ ~25 here), at least one a second; no command per lease.
        XCTAssertGreaterThanOrEqual(renewals.count, 2, "the liveness key renewed every second")
        XCTAssertLessThanOrEqual(renewals.count, 30, "one per slice at most, not one per lease: \(renewals.count)")
        XCTAssertEqual(others.map(\.args), [], "no renewal of a lease of its own")
        // Together they would come in one burst per interval: all 30 checks in the same tick, all 30
        // renewals within the few ms the creations took. Spread: 3 checks per 0.1 s slice (a late tick
        // may meet the next); renewals at random phases over half an interval, those of one 0.1 s
        // slice in one call (~6 of the 30 per slice on average; a random phase puts up to ~12 in one slice,
        // and on a loaded host a late slice meets the next in one 50 ms window: 16–20 were seen). Not
        // spread, a whole round (all 30) lands in one window, which the bound below still refuses.
        XCTAssertLessThanOrEqual(densest(checks.map(\.time), window: 0.02), count / 3, "checks: \(checks.count)")
    }

    /// A streamed session is checked one by one on every `expiryRenewalPasses`-th pass, which renews its
    /// keys' expiry, and on the others only while its holder is not known: with a 20 s
    /// idle time-out (renewal interval 2 s) and a 1 s lease TTL (a pass every 1 s), each session's checks
    /// carry the renewal every other second, and at most its first one (before it knew its holder) does not;
    /// the slices take turns, so a pass renews half the sessions, not all of them every other pass.
    func testChecksOfStreamedSessionsRenewTheExpiryOncePerRenewalInterval() throws {
        let a = try node("a", leaseTTL: 1, threads: 1)
        let b = try node("b", leaseTTL: 1, idleTimeout: 20, threads: 1)
        let ids = try (0..<10).map { _ in try a.createSession() }
        var streams: [WireConnection] = []
        defer { for s in streams { s.close() } }
        for id in ids {
            let (conn, events) = try b.stream(id)
            _ = try events.next()
            streams.append(conn)
        }
        let seen = try monitor(for: 4.5)
        // Per checked session in each batched call: (session key, its renew flag).
        var flags: [String: [String]] = [:]
        var renewedAt: [Double] = []
        for c in seen {
            guard c.args.first == "EVALSHA", c.args.count >= 15, c.args[2] == "1", let n = Int(c.args[5]),
                c.args[11].hasSuffix(":streams")
            else { continue }
            var i = 9  // after the idle expiry, n, the liveness prefix, the stream-liveness key and ms
            for _ in 0..<n {
                guard i + 5 < c.args.count, let m = Int(c.args[i + 5]) else { break }
                flags[c.args[i], default: []].append(c.args[i + 4])
                if c.args[i + 4] == "1" { renewedAt.append(c.time) }
                i += 6 + m
            }
        }
        for id in ids {
            let mine = flags.first { $0.key.contains("{\(id)}") }?.value ?? []
            XCTAssertGreaterThanOrEqual(mine.filter { $0 == "1" }.count, 2, "renewed every 2 s: \(mine)")
            XCTAssertLessThanOrEqual(
                mine.filter { $0 == "0" }.count, 1, "checked between renewals only before its holder was known: \(mine)"
            )
        }
        // Each slice renews on passes of its own: half the sessions a pass, not all ten every other pass.
        XCTAssertLessThanOrEqual(densest(renewedAt, window: 0.8), 7, "renewals spread over the passes")
    }
}
