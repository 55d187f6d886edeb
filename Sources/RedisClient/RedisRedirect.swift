/// A Redis Cluster redirection read from an error reply: `MOVED <slot> <host:port>` (the slot lives
/// there now: update the map) or `ASK <slot> <host:port>` (this key is being migrated: ask there once,
/// after `ASKING`). Either way the command did not run. Pure value.
enum RedisRedirect: Equatable {
    case moved(slot: Int, to: RedisAddress)
    case ask(slot: Int, to: RedisAddress)

    /// The redirection in `message`, or nil. An empty host (`MOVED 3999 :7002`) means the host of
    /// the node that answered (`from`).
    init?(_ message: String, from: RedisAddress) {
        let parts = message.split(separator: " ")
        guard parts.count == 3, let slot = Int(parts[1]), (0..<RedisSlot.count).contains(slot) else { return nil }
        var target = parts[2]
        if target.hasPrefix(":") { target = Substring(from.host.contains(":") ? "[\(from.host)]" : from.host) + target }
        guard let address = RedisAddress(target) else { return nil }
        switch parts[0] {
        case "MOVED": self = .moved(slot: slot, to: address)
        case "ASK": self = .ask(slot: slot, to: address)
        default: return nil
        }
    }
}
