/// Lua the scripts share: Redis's own clock, so that every node's deadlines and buckets are read against
/// one time whatever the nodes' clocks say.
enum LuaClock {
    /// Sets the local `now` to Redis's `TIME` in milliseconds (a script that uses it is not replicated by
    /// its text but by its effects, as Redis 7 does for every script).
    static let now = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        """
}
