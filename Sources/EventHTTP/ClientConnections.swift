import Primitives

/// Open connections per client (the peer address) across all of a server's loops: what
/// `--max-connections-per-client` is checked against. An entry exists only while its client has a
/// connection open, so the table is bounded by the open connections (`--max-connections`), however
/// many addresses a client rotates through.
///
/// Threading: any thread; sixteen locks, picked by the address's hash, so loops accepting from
/// different clients rarely meet on one.
final class ClientConnections: Sendable {
    private let shards: [Lock<[ClientAddress: Int32]>] = (0..<16).map { _ in Lock([:]) }

    private func shard(_ a: ClientAddress) -> Lock<[ClientAddress: Int32]> {
        shards[Int(truncatingIfNeeded: ((a.low ^ a.high) &* 0x9E37_79B9_7F4A_7C15) >> 60)]
    }

    /// Counts a new connection of `client` unless it has `limit` already: true when counted.
    func open(_ client: ClientAddress, limit: Int) -> Bool {
        shard(client).withLock { table in
            let n = table[client, default: 0]
            guard n < limit else { return false }
            table[client] = n + 1
            return true
        }
    }

    /// A counted connection of `client` closed.
    func close(_ client: ClientAddress) {
        shard(client).withLock { table in
            guard let n = table[client] else { return }
            table[client] = n > 1 ? n - 1 : nil
        }
    }

    /// Clients with at least one connection open (for tests and `/metrics`).
    var clients: Int { shards.reduce(0) { n, s in n + s.withLock { $0.count } } }
}
