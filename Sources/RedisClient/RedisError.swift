/// Why a Redis command failed.
public enum RedisError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The connection is down (waiting to reconnect, or closed); the command was not sent.
    case notConnected
    /// No reply within the command's time-out; a late reply is dropped.
    case timeout
    /// The connection was lost (or dropped) before the reply arrived: the command may have run.
    case connectionLost(String)
    /// The server answered with an error reply (`ERR …`, `NOSCRIPT …`, a script's own error).
    case server(String)
    /// A reply had an unexpected shape.
    case unexpectedReply(String)
    /// Refused before anything was sent: the connection already has `maxInFlight` commands outstanding.
    /// Nothing ran; the caller answers `503` + `Retry-After` (and may retry later).
    case overloaded
    /// The Redis that serves this command (the master of its slot) cannot be reached now: a failover or
    /// reconnect is under way (`READONLY`, `CLUSTERDOWN`, a master that is down). The command was not
    /// run; the caller answers `503` + `Retry-After`.
    case unavailable(String)
    /// Refused before anything was sent: the command must reach `wanted` replicas and its master has only
    /// `connected` (`RedisClientOptions.replicaAcksStrict`). Nothing ran; `503` + `Retry-After`.
    case shortOfReplicas(connected: Int, wanted: Int)

    /// The server error's first word (`NOSCRIPT`, `FENCED`, `WRONGTYPE`), or nil.
    public var serverCode: String? {
        guard case .server(let message) = self else { return nil }
        return message.split(separator: " ", maxSplits: 1).first.map(String.init)
    }

    /// True for the answers a multi-key call gets when its keys' slots are not all where the caller's slot
    /// map put them (`MOVED`, `ASK`, `CROSSSLOT`, `TRYAGAIN`): sent again one slot at a time, it succeeds.
    public var isSlotRedirect: Bool {
        guard let code = serverCode else { return false }
        return ["MOVED", "ASK", "CROSSSLOT", "TRYAGAIN"].contains(code)
    }

    /// A readable description (never contains a password).
    public var description: String {
        switch self {
        case .notConnected: return "redis: not connected"
        case .timeout: return "redis: command timed out"
        case .connectionLost(let why): return "redis: connection lost (\(why))"
        case .server(let message): return "redis: \(message)"
        case .unexpectedReply(let what): return "redis: unexpected reply (\(what))"
        case .overloaded: return "redis: too many commands in flight on the connection (refused, not sent)"
        case .unavailable(let why): return "redis: unavailable (\(why))"
        case .shortOfReplicas(let connected, let wanted):
            return "redis: the master has \(connected) connected replicas, \(wanted) wanted (refused, not sent)"
        }
    }
}
