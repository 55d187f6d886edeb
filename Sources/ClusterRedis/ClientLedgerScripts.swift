import RedisClient

/// The Lua scripts of `RedisClientLedger`. Time is Redis's `TIME` (one clock for every node). A client's
/// two keys share the hash tag `{client}`: one slot, one call.
enum ClientLedgerScripts {
    /// Every script here (loaded on each master as soon as it is connected).
    static var all: [RedisScript] { [reserve, refresh] }

    /// KEYS: bucket, live sessions. ARGV: creations per second, burst, most live, session id, counted ms.
    /// Drops the entries whose time is up, then refuses at the live maximum ({2, max}) or when the bucket
    /// holds less than one creation ({1, ms until it does}); else takes a creation and counts the session
    /// until now + counted ms ({0, live sessions now}). Checks everything before its first write.
    static let reserve = RedisScript(
        """
        \(LuaClock.now)
        local rate = tonumber(ARGV[1]) / 1000
        local burst = tonumber(ARGV[2])
        local maxLive = tonumber(ARGV[3])
        local counted = tonumber(ARGV[5])
        redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
        local live = redis.call('ZCARD', KEYS[2])
        if live >= maxLive then return {2, maxLive} end
        local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
        local tokens = tonumber(b[1]) or burst
        local ts = tonumber(b[2]) or now
        if now > ts then tokens = math.min(burst, tokens + (now - ts) * rate) end
        if tokens < 1 then return {1, math.ceil((1 - tokens) / rate)} end
        tokens = tokens - 1
        redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
        redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1000)
        redis.call('ZADD', KEYS[2], now + counted, ARGV[4])
        redis.call('PEXPIRE', KEYS[2], counted + 1000)
        return {0, live + 1}
        """)

    /// KEYS: live sessions of client 1 … n. ARGV: counted ms, then per key: n, session 1 … n. Each session
    /// still counted is counted until now + counted ms (`XX`: one released meanwhile stays released), and
    /// each key lives as long as its latest deadline. `allow-cross-slot-keys`: one call per master
    /// (`RedisClientLedger.refresh` groups the keys by master). Returns the sessions still counted.
    static let refresh = RedisScript(
        """
        #!lua flags=allow-cross-slot-keys
        \(LuaClock.now)
        local counted = tonumber(ARGV[1])
        local at = 2
        local kept = 0
        for _, k in ipairs(KEYS) do
          local n = tonumber(ARGV[at])
          for i = 1, n do kept = kept + redis.call('ZADD', k, 'XX', 'CH', now + counted, ARGV[at + i]) end
          at = at + n + 1
          redis.call('PEXPIRE', k, counted + 1000)
        end
        return kept
        """)
}
