import RedisClient

/// The search-cache scripts of `RedisSearchCache`. Ages come from Redis `TIME` (one clock for
/// every node). An entry is a hash {v: payload, t: stored at ms} with PEXPIRE = max age.
enum CacheScripts {
    /// KEYS: entry. Returns {payload, age ms} or nil.
    static let get = RedisScript(
        """
        local m = redis.call('HMGET', KEYS[1], 'v', 't')
        if not m[1] then return nil end
        \(LuaClock.now)
        return {m[1], now - tonumber(m[2])}
        """)

    /// KEYS: entry, lock. ARGV: payload, max age ms, holder, wake channel.
    /// Stores, releases the holder's lock, and publishes the wake-up in one step.
    static let fill = RedisScript(
        """
        \(LuaClock.now)
        redis.call('HSET', KEYS[1], 'v', ARGV[1], 't', tostring(now))
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('DEL', KEYS[2]) end
        redis.call('PUBLISH', ARGV[4], 'filled')
        return 1
        """)

    /// KEYS: lock. ARGV: holder, wake channel. Releases the holder's lock and wakes the waiters.
    static let unlock = RedisScript(
        """
        if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
        redis.call('PUBLISH', ARGV[2], 'unlocked')
        return 1
        """)
}
