import Primitives
import RedisClient

/// Every Redis key and channel cluster mode uses, in one place (docs/CLUSTER.md lists their bounds
/// and expiries). A session's keys and channels share the hash tag `{id}`, so they land in one Redis
/// Cluster slot (a multi-key script needs it; the commit script's `SPUBLISH` must stay in its slot).
/// The cluster-wide keys and channels have tags of their own (`{name}`, `{holder}`, `{cache key}`): each
/// is one slot, on one shard, whatever else its name holds.
public struct ClusterKeys: Sendable, Equatable {
    /// Prefix of every key (`bff` by default; tests use one per test).
    public var prefix: String

    /// Keys under `prefix`.
    public init(prefix: String = "bff") { self.prefix = prefix }

    /// HASH {state, seq, inputSeq, fence, lease}: the session's committed snapshot, fencing counter and owner
    /// lease ("holder|token", held while the holder's `live` key on the session's master exists).
    public func session(_ id: String) -> String { "\(prefix):s:{\(id)}" }
    /// STREAM of committed events, entry id "<event id>-0", field `d`; `MAXLEN ~` history.
    public func events(_ id: String) -> String { session(id) + SessionKey.events.rawValue }
    /// STRING inputSeq, EX idempotency seconds: one `Idempotency-Key`.
    public func idempotency(_ id: String, _ key: String) -> String {
        session(id) + SessionKey.idempotency.rawValue + key
    }
    /// ZSET member "<holder>/<stream>" → deadline (Redis ms): the session's open event streams, every node's.
    public func streams(_ id: String) -> String { session(id) + SessionKey.streams.rawValue }
    /// Sharded pub/sub channel of the session's committed events ("<event id>\n<payload>").
    public func channel(_ id: String) -> String { session(id) + SessionKey.channel.rawValue }

    /// What follows a session's hash key in the name of each of its other keys and its channel.
    public enum SessionKey: String, Sendable {
        case hash = ""
        case events = ":ev"
        case idempotency = ":idem:"
        case streams = ":streams"
        case channel = ":ch"
    }

    /// Session `id`'s key `kind` (followed by `tail`: an idempotency key's own name) as a Redis argument,
    /// written once into its bytes: the same bytes as `RedisArg(session(id) + kind.rawValue + tail)`
    /// without a `String` grown in between. The commit path builds four for every commit (interpolation
    /// and the copy were a costly part of each input: docs/BENCHMARKS.md).
    public func arg(_ id: String, _ kind: SessionKey = .hash, _ tail: String = "") -> RedisArg {
        let count = prefix.utf8.count + id.utf8.count + kind.rawValue.utf8.count + tail.utf8.count + 5
        return RedisArg(
            bytes: bytesWritten(count: count) { buffer in
                var written = 0
                func put(_ s: String) {  // the view copies its contiguous bytes at once
                    written += UnsafeMutableBufferPointer(rebasing: buffer[written...]).initialize(from: s.utf8).1
                }
                put(prefix)
                put(":s:{")
                put(id)
                buffer[written] = UInt8(ascii: "}")
                written += 1
                put(kind.rawValue)
                put(tail)
                return written
            })
    }
    /// STRING "1", PX = lease TTL: lease holder `holder` (one loop of one node) is alive, for the sessions of
    /// one master: `tag` is a hash tag in a slot of that master (`liveTag`), so the scripts of that master's
    /// sessions can read it. Every lease of the holder there is held while it exists (one key per
    /// loop and master renewed, not one lease per session).
    public func live(holder: String, tag: String) -> String { livePrefix(tag: tag) + holder }
    /// `live(holder:tag:)` without the holder: the scripts add the holder named in a session's lease.
    public func livePrefix(tag: String) -> String { "\(prefix):live:{\(tag)}:" }
    /// STRING "1", PX = 3 stream-check intervals: the loop `holder` streams sessions of one master (`tag` as
    /// for `live`). A member of a session's set of open streams (`streams`, named `<holder>/<n>`) counts
    /// while its loop's key on the session's master exists: one key per streaming loop and master renewed
    /// once per check interval, not each session's members.
    public func streamLive(holder: String, tag: String) -> String { streamLivePrefix(tag: tag) + holder }
    /// `streamLive(holder:tag:)` without the holder: the scripts add the holder a member names.
    public func streamLivePrefix(tag: String) -> String { "\(prefix):slive:{\(tag)}:" }
    /// The hash tag of the `live` keys on one Redis or a Sentinel set's master (every slot is its).
    public static let unshardedLiveTag = "m0"
    /// The hash tag of the `live` keys on a master of a Redis Cluster: `m<n>` for the first `n` whose slot
    /// `serves` says it serves (nil only if it serves none: the first 147,976 tags hash to all 16,384 slots).
    public static func liveTag(where serves: (Int) -> Bool) -> String? {
        for n in 0..<200_000 {
            let tag = "m\(n)"
            if serves(RedisSlot.of(tag)) { return tag }
        }
        return nil
    }

    /// Sharded pub/sub channel of the inputs forwarded to lease holder `holder` (one loop of one node),
    /// for whichever of its sessions they name: it subscribes for as long as it runs, one channel per
    /// master (`holder` + "/n", in a slot of that master) and one from the start (the bare `holder`).
    public func inputs(holder: String) -> String { "\(prefix):in:{\(holder)}" }
    /// Sharded pub/sub channel on which owners answer the inputs lease holder `holder` forwarded (one
    /// shard carries one loop's replies).
    public func replies(_ holder: String) -> String { "\(prefix):reply:{\(holder)}" }

    /// STRING, and the sharded pub/sub channel announcing it: the latest shared value `name`
    /// (`RedisStatusBoard`).
    public func status(_ name: String) -> String { "\(prefix):status:{\(name)}" }

    /// HASH {tokens, ts, until}: the cluster-wide upstream token bucket `name`.
    public func rateLimit(_ name: String) -> String { "\(prefix):rl:{\(name)}" }
    /// STRING count, PX = the client's window: the calls `client` started from bucket `name` in its
    /// current window (its fair share; same slot as the bucket, so one script reads both).
    public func rateLimitClient(_ name: String, _ client: String) -> String { "\(prefix):rl:{\(name)}:c:\(client)" }
    /// HASH {k1, t1, k2, t2}, PX = one window from the latest ask: the latest client to ask bucket `name`
    /// for a call and when (ms), and the latest ask of any other client (`RecentAskers`; whether a
    /// client's share binds; same slot as the bucket).
    public func rateLimitAskers(_ name: String) -> String { "\(prefix):rl:{\(name)}:askers" }

    /// HASH {tokens, ts}: client `client`'s bucket of session creations (its per-client rate, cluster-wide;
    /// PX = until it would be full again).
    public func clientBucket(_ client: String) -> String { "\(prefix):cl:{\(client)}" }
    /// ZSET session id → counted until (Redis ms): the live sessions of client `client`, cluster-wide (PX =
    /// the latest of those deadlines).
    public func clientSessions(_ client: String) -> String { "\(prefix):cl:{\(client)}:live" }

    /// HASH {v, t}: a cached search page (PX = stale max age).
    public func cacheEntry(_ key: String) -> String { "\(prefix):c:{\(key)}" }
    /// STRING holder, PX = lock TTL: the single-flight lock of a cache key.
    public func cacheLock(_ key: String) -> String { "\(prefix):c:{\(key)}:lock" }
    /// Classic pub/sub channel announcing that a cache key was filled or its lock released (rare: at
    /// most one per upstream call; every node listens through one pattern).
    public func cacheWake(_ key: String) -> String { "\(prefix):cwake:\(key)" }
    /// The pattern matching every `cacheWake` channel (one `PSUBSCRIBE` per node loop that waits).
    public var cacheWakePattern: String { "\(prefix):cwake:*" }

    /// STRING, PX = the login's lifetime from its last use: one signed-in person's login (who they are and
    /// their token, sealed), under the digest of its cookie (`LoginCookie.key(of:)`), never the cookie.
    public func login(_ key: String) -> String { "\(prefix):login:{\(key)}" }
    /// SET of session ids, PX renewed by each new one: the sessions created for login `key`, so a sign-out
    /// on any node ends them all (members of sessions gone since are harmless).
    public func loginSessions(_ key: String) -> String { "\(prefix):login:{\(key)}:sessions" }
}
