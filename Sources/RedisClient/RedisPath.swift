import CHiredis

/// What the kernel knows of the TCP path under a Redis connection that has answered nothing for its stall
/// limit while commands waited: it tells a Redis that is slow or stopped from a path that is gone.
///
/// Redis's host acknowledges every byte it receives whatever Redis itself is doing: a busy script, a burst
/// of deletes from many nodes, `SIGSTOP`. A new connection would reach that same Redis, so a reset
/// only fails the commands that were waiting for it. A path is gone when the connection is no longer
/// established or a segment was sent again and again with no ACK for the whole limit (a cut link, a host
/// that is gone). `RedisConnection.checkStall` resets the connection then, and keeps it (silent) otherwise.
///
/// Threading: a value; read on the connection's loop.
struct RedisPath: Equatable, CustomStringConvertible {
    /// The connection is established.
    var established: Bool
    /// Consecutive retransmissions of the oldest unacknowledged segment, or unanswered window probes.
    var retransmissions: UInt32
    /// Segments sent and not yet acknowledged.
    var unacknowledged: UInt32
    /// Milliseconds since the last ACK came.
    var millisecondsSinceACK: UInt32

    /// The kernel's view of `context`'s socket; nil when unknown (no socket, not TCP).
    static func read(_ context: UnsafeMutablePointer<redisAsyncContext>?) -> RedisPath? {
        guard let context else { return nil }
        var out: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
        let status = withUnsafeMutablePointer(to: &out) {
            $0.withMemoryRebound(to: UInt32.self, capacity: 4) { chiredis_tcp_path(context, $0) }
        }
        guard status == 0 else { return nil }
        return RedisPath(
            established: out.0 != 0, retransmissions: out.1, unacknowledged: out.2, millisecondsSinceACK: out.3)
    }

    /// The path is gone: not established, or bytes sent again with no ACK for `limit` seconds.
    func isGone(limit: Double) -> Bool {
        !established || (retransmissions > 0 && Double(millisecondsSinceACK) >= limit * 1000 * 0.999)
    }

    /// Stall limits of silence after which a connection is reset even though its path looks alive (a proxy
    /// in front of a dead Redis acknowledges for it).
    static let keptSilenceLimits = 10.0

    /// The one rule for a connection silent for `seconds` past its limit `limit` (a command connection, a
    /// subscription waiting for a confirmation): kept unless its path is gone or the silence has lasted
    /// `keptSilenceLimits` limits. An unknown path (not TCP) counts as not gone.
    static func keeps(_ path: RedisPath?, silentFor seconds: Double, limit: Double) -> Bool {
        path?.isGone(limit: limit) != true && seconds < keptSilenceLimits * limit * 0.999
    }

    /// Every byte written was acknowledged: a path that broke after its last ACK shows only once more is
    /// written (`RedisConnection` then writes a `PING` as a probe).
    var allAcknowledged: Bool { unacknowledged == 0 }

    var description: String {
        established
            ? "\(unacknowledged) segments unacknowledged, \(retransmissions) retransmissions, last ACK \(millisecondsSinceACK) ms ago"
            : "not established"
    }
}
