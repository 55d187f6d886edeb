/// Which Redis deployment a node uses and how to reach it, parsed from `--redis-url`:
///
/// - `redis://[:password@]host[:port][/db]`: one Redis (`standalone`), exactly as `RedisConfiguration(url:)`.
/// - `redis+sentinel://[:password@]host:port[,host:port…]/MASTER[?db=N]`: Redis Sentinel; the hosts are
///   sentinels (port 26379 when left out), `MASTER` the name they monitor. The password authenticates
///   to the master (and replicas), not to the sentinels.
/// - `redis+cluster://[:password@]host:port[,host:port…]`: Redis Cluster; the hosts are seeds (port 6379
///   when left out) from which the slot map is learnt. A cluster has database 0 only.
///
/// `node` carries what every data node shares (password, database, time-outs, back-off); its host and
/// port are the first seed's. A value: any thread. Its `description` never shows the password.
public struct RedisTopology: Sendable, Equatable, CustomStringConvertible {
    /// The deployment's kind.
    public enum Kind: Sendable, Equatable {
        /// One Redis at `seeds[0]`.
        case standalone
        /// Sentinels at `seeds` that monitor the master named `master`.
        case sentinel(master: String)
        /// A Redis Cluster whose map is learnt from `seeds`.
        case cluster
    }

    /// The kind.
    public var kind: Kind
    /// The one Redis, the sentinels, or the cluster's seed nodes.
    public var seeds: [RedisAddress]
    /// Password, database, time-outs and back-off of every data node.
    public var node: RedisConfiguration

    /// A topology of `kind` reached through `seeds`, with `node`'s settings for each data node.
    public init(kind: Kind, seeds: [RedisAddress], node: RedisConfiguration) {
        self.kind = kind
        self.seeds = seeds
        self.node = node
    }

    /// One Redis at `configuration`.
    public init(standalone configuration: RedisConfiguration) {
        self.init(
            kind: .standalone, seeds: [RedisAddress(host: configuration.host, port: configuration.port)],
            node: configuration)
    }

    /// Parses any of the three URL forms; nil if malformed (an unknown query parameter included).
    public init?(url: String) {
        if url.hasPrefix("redis://") {
            guard let c = RedisConfiguration(url: url) else { return nil }
            self.init(standalone: c)
            return
        }
        let sentinel = "redis+sentinel://"
        let cluster = "redis+cluster://"
        let isSentinel = url.hasPrefix(sentinel)
        guard isSentinel || url.hasPrefix(cluster) else { return nil }
        var rest = Substring(url.dropFirst(isSentinel ? sentinel.count : cluster.count))
        var query: Substring = ""
        if let q = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: q)...]
            rest = rest[..<q]
        }
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = userinfo.firstIndex(of: ":"), userinfo[..<colon].isEmpty,
                let decoded = RedisConfiguration.percentDecoded(userinfo[userinfo.index(after: colon)...])
            else { return nil }
            password = decoded
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        var seeds: [RedisAddress] = []
        for hostPort in rest.split(separator: ",", omittingEmptySubsequences: false) {
            let withPort =
                hostPort.hasSuffix("]") || !hostPort.contains(":")
                ? "\(hostPort):\(isSentinel ? 26379 : 6379)" : String(hostPort)
            guard let a = RedisAddress(withPort) else { return nil }
            seeds.append(a)
        }
        guard !seeds.isEmpty else { return nil }
        var database = 0
        for item in query.split(separator: "&") {
            let pair = item.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0] == "db", isSentinel, let n = Int(pair[1]), n >= 0 else { return nil }
            database = n
        }
        let kind: Kind
        if isSentinel {
            guard let name = RedisConfiguration.percentDecoded(path), !name.isEmpty, !name.contains("/") else {
                return nil
            }
            kind = .sentinel(master: name)
        } else {
            guard path.isEmpty else { return nil }
            kind = .cluster
        }
        let node = RedisConfiguration(host: seeds[0].host, port: seeds[0].port, password: password, database: database)
        self.init(kind: kind, seeds: seeds, node: node)
    }

    /// `node`'s settings for the data node at `address`.
    public func configuration(for address: RedisAddress) -> RedisConfiguration {
        var c = node
        c.host = address.host
        c.port = address.port
        return c
    }

    /// The URL with the password replaced by `***`.
    public var description: String {
        let auth = node.password == nil ? "" : ":***@"
        let hosts = seeds.map(\.description).joined(separator: ",")
        switch kind {
        case .standalone: return node.description
        case .sentinel(let master): return "redis+sentinel://\(auth)\(hosts)/\(master)?db=\(node.database)"
        case .cluster: return "redis+cluster://\(auth)\(hosts)"
        }
    }
}
