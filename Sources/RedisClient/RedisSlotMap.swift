/// One shard of a Redis Cluster as a slot map reports it: its master, its replicas, its slot ranges.
public struct RedisShard: Sendable, Equatable {
    /// The master serving the shard's slots.
    public var master: RedisAddress
    /// Its replicas (any health).
    public var replicas: [RedisAddress]
    /// The slot ranges it serves.
    public var slots: [ClosedRange<Int>]

    /// A shard served by `master`, with `replicas`, owning `slots`.
    public init(master: RedisAddress, replicas: [RedisAddress], slots: [ClosedRange<Int>]) {
        self.master = master
        self.replicas = replicas
        self.slots = slots
    }
}

/// Which master serves each of the 16384 slots: learnt from `CLUSTER SHARDS` (Redis 7) or
/// `CLUSTER SLOTS`, patched by `MOVED`. A value; any thread.
struct RedisSlotMap: Sendable, Equatable {
    /// The shards that own slots, in the order the node listed them.
    private(set) var shards: [RedisShard]
    /// Per slot: an index into `masters`, or -1 (no owner).
    private var owner: [Int16]
    /// Every master that owns a slot (a `MOVED` may add one that `shards` does not list yet).
    private(set) var masters: [RedisAddress]

    /// A map of `shards` (later shards win a slot listed twice).
    init(shards: [RedisShard]) {
        self.shards = shards
        owner = Array(repeating: -1, count: RedisSlot.count)
        masters = []
        for shard in shards {
            for range in shard.slots {
                for slot in range where (0..<RedisSlot.count).contains(slot) { assign(slot: slot, to: shard.master) }
            }
        }
    }

    /// The master of `slot`, or nil when no master owns it.
    func master(ofSlot slot: Int) -> RedisAddress? {
        let i = owner[slot]
        return i < 0 ? nil : masters[Int(i)]
    }

    /// Slots that no master owns.
    var uncoveredSlots: Int { owner.reduce(0) { $0 + ($1 < 0 ? 1 : 0) } }

    /// The replicas the map lists for `master`.
    func replicas(of master: RedisAddress) -> [RedisAddress] {
        shards.first { $0.master == master }?.replicas ?? []
    }

    /// `slot` now lives at `address` (a `MOVED`).
    mutating func assign(slot: Int, to address: RedisAddress) {
        let index: Int
        if let i = masters.firstIndex(of: address) {
            index = i
        } else {
            masters.append(address)
            index = masters.count - 1
        }
        owner[slot] = Int16(index)
    }

    /// Parses a `CLUSTER SHARDS` reply: per shard `slots` (start/end pairs) and `nodes` (field/value
    /// arrays with `ip`, `port`, `role`, `health`). A shard without slots is skipped (a failed master
    /// that was replaced is listed as a shard of its own); of several masters the healthy one wins.
    static func parse(shards reply: RESPValue) -> RedisSlotMap? {
        guard let items = reply.array else { return nil }
        var shards: [RedisShard] = []
        for item in items {
            guard let fields = item.array, let shard = fieldMap(fields) else { return nil }
            guard let flat = shard["slots"]?.array, let nodes = shard["nodes"]?.array else { return nil }
            let bounds = flat.compactMap { $0.int.map(Int.init) }
            guard bounds.count == flat.count, bounds.count % 2 == 0 else { return nil }
            let ranges = stride(from: 0, to: bounds.count, by: 2).map { bounds[$0]...bounds[$0 + 1] }
            var master: (RedisAddress, Bool)?
            var replicas: [RedisAddress] = []
            for node in nodes {
                guard let fields = node.array, let n = fieldMap(fields), let ip = n["ip"]?.string,
                    let port = n["port"]?.int, let role = n["role"]?.string
                else { return nil }
                let address = RedisAddress(host: ip, port: Int(port))
                let healthy = n["health"]?.string == "online"
                if role == "master", master == nil || (healthy && master?.1 == false) {
                    master = (address, healthy)
                } else {
                    replicas.append(address)
                }
            }
            guard !ranges.isEmpty, let m = master else { continue }
            shards.append(RedisShard(master: m.0, replicas: replicas, slots: ranges))
        }
        return RedisSlotMap(shards: shards)
    }

    /// Parses a `CLUSTER SLOTS` reply: `[start, end, [ip, port, id], replica…]` per range.
    static func parse(slots reply: RESPValue) -> RedisSlotMap? {
        guard let items = reply.array else { return nil }
        var shards: [RedisShard] = []
        for item in items {
            guard let a = item.array, a.count >= 3, let start = a[0].int, let end = a[1].int else { return nil }
            let nodes = a[2...].compactMap { node -> RedisAddress? in
                guard let n = node.array, n.count >= 2, let ip = n[0].string, let port = n[1].int else { return nil }
                return RedisAddress(host: ip, port: Int(port))
            }
            guard let master = nodes.first else { return nil }
            if let i = shards.firstIndex(where: { $0.master == master }) {
                shards[i].slots.append(Int(start)...Int(end))
            } else {
                shards.append(
                    RedisShard(master: master, replicas: Array(nodes.dropFirst()), slots: [Int(start)...Int(end)]))
            }
        }
        return RedisSlotMap(shards: shards)
    }

    /// `[k1, v1, k2, v2…]` as a dictionary (RESP2's form of a map); nil for an odd count.
    private static func fieldMap(_ fields: [RESPValue]) -> [String: RESPValue]? {
        guard fields.count % 2 == 0 else { return nil }
        var out: [String: RESPValue] = [:]
        for i in stride(from: 0, to: fields.count, by: 2) {
            guard let k = fields[i].string else { return nil }
            out[k] = fields[i + 1]
        }
        return out
    }
}
