import RedisClient

/// The Lua scripts of `RedisSessionStore`. Each runs atomically in Redis; each checks everything
/// that can fail before its first write (Redis does not roll a script back on error).
enum SessionScripts {
    /// Every script here (loaded on each master as soon as it is connected: `RedisClient.preload`).
    static var all: [RedisScript] {
        [create, acquire, admitStream, renewStreams, renewMany, release, commit, replay, acknowledgedInputSeq, delete]
    }

    /// KEYS: session, lease. ARGV: holder, state, lease ms, idle s. Creates with fence 1.
    static let create = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('EXISTS session exists') end
        redis.call('HSET', KEYS[1], 'state', ARGV[2], 'seq', '0', 'inputSeq', '0', 'fence', '1')
        redis.call('EXPIRE', KEYS[1], ARGV[4])
        redis.call('SET', KEYS[2], ARGV[1] .. '|1', 'PX', ARGV[3])
        return 1
        """)

    /// KEYS: session, lease, events. ARGV: holder, lease ms, idle s, new token (0/1).
    /// Returns {1, token, state, seq, inputSeq} or {0, holder, pttl}. A new holder gets
    /// `HINCRBY fence 1` (SET NX semantics: only when no lease exists); the holder itself renews, and
    /// keeps its token unless it asks for a new one (ARGV[4] = 1: it no longer runs the session).
    /// Every attempt, granted or not, gives the session and its history their idle expiry again (an
    /// attempt means the session is in use: an input here, a stream here of a session run elsewhere),
    /// so a streamed session costs one round trip per check.
    static let acquire = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('GONE session') end
        redis.call('EXPIRE', KEYS[1], ARGV[3])
        redis.call('EXPIRE', KEYS[3], ARGV[3])
        local cur = redis.call('GET', KEYS[2])
        local token
        if cur then
          local sep = string.find(cur, '|[^|]*$')
          local holder = string.sub(cur, 1, sep - 1)
          if holder ~= ARGV[1] then return {0, holder, redis.call('PTTL', KEYS[2])} end
          token = string.sub(cur, sep + 1)
          if ARGV[4] == '1' then token = tostring(redis.call('HINCRBY', KEYS[1], 'fence', 1)) end
        else
          token = tostring(redis.call('HINCRBY', KEYS[1], 'fence', 1))
        end
        redis.call('SET', KEYS[2], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
        local m = redis.call('HMGET', KEYS[1], 'state', 'seq', 'inputSeq')
        return {1, token, m[1], m[2], m[3]}
        """)

    /// Lua: `now` = Redis's clock in ms (`TIME`, one clock for every node), then the members of the set
    /// of open streams `KEYS[key]` whose deadline passed are dropped.
    private static func pruneStreams(key: Int) -> String {
        """
        \(LuaClock.now)
        redis.call('ZREMRANGEBYSCORE', KEYS[\(key)], '-inf', string.format('%.0f', now))
        """
    }

    /// KEYS: session, streams. ARGV: member, limit, deadline ms, idle s.
    /// The cluster-wide stream limit: drops the members whose deadline (a score, Redis ms) passed,
    /// then adds `member` with the deadline now + ARGV[3] if it is there already or fewer than
    /// `limit` remain. 1 if admitted, 0 if refused; `GONE` if the session does not exist.
    static let admitStream = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('GONE session') end
        \(pruneStreams(key: 2))
        if not redis.call('ZSCORE', KEYS[2], ARGV[1]) and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
          return 0
        end
        local ttl = tonumber(ARGV[3])
        redis.call('ZADD', KEYS[2], string.format('%.0f', now + ttl), ARGV[1])
        redis.call('PEXPIRE', KEYS[2], string.format('%.0f', math.max(tonumber(ARGV[4]) * 1000, ttl)))
        return 1
        """)

    /// KEYS: session, events, streams, lease. ARGV: deadline ms, idle s, member 1 … member n.
    /// A streamed session's periodic check: the idle expiry of the session and its history again,
    /// expired stream members dropped, this node's members given the deadline now + ARGV[1] (added
    /// again if they were dropped); returns {the lease's holder (false if no lease), seq}. `GONE` if no
    /// session.
    static let renewStreams = RedisScript(
        """
        if redis.call('EXPIRE', KEYS[1], ARGV[2]) == 0 then return redis.error_reply('GONE session') end
        redis.call('EXPIRE', KEYS[2], ARGV[2])
        \(pruneStreams(key: 3))
        local ttl = tonumber(ARGV[1])
        if #ARGV > 2 then
          local deadline = string.format('%.0f', now + ttl)
          for i = 3, #ARGV do redis.call('ZADD', KEYS[3], deadline, ARGV[i]) end
          redis.call('PEXPIRE', KEYS[3], string.format('%.0f', math.max(tonumber(ARGV[2]) * 1000, ttl)))
        end
        local seq = redis.call('HGET', KEYS[1], 'seq')
        local cur = redis.call('GET', KEYS[4])
        if not cur then return {false, seq} end
        local sep = string.find(cur, '|[^|]*$')
        return {string.sub(cur, 1, sep - 1), seq}
        """)

    /// KEYS: lease 1 … lease n. ARGV: lease ms, "holder|token" 1 … n. Each lease whose value is exactly
    /// its "holder|token" gets the lease TTL again: {1 if renewed, 0 if the lease is not ours, …}.
    /// `allow-cross-slot-keys` (Redis 7): on a cluster the leases of one call may be in several slots of
    /// one master (`RedisSessionStore.renew` groups them by master), not one call per slot.
    static let renewMany = RedisScript(
        """
        #!lua flags=allow-cross-slot-keys
        local out = {}
        for i, k in ipairs(KEYS) do
          if redis.call('GET', k) == ARGV[i + 1] then out[i] = redis.call('PEXPIRE', k, ARGV[1]) else out[i] = 0 end
        end
        return out
        """)

    /// KEYS: lease. ARGV: "holder|token". 1 if released (hand-over), 0 if it was not ours.
    static let release = RedisScript(
        """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
        return redis.call('DEL', KEYS[1])
        """)

    /// KEYS: session, events, idempotency key (or any key of the session when unused).
    /// ARGV: token, state, history max, idle s, is input (0/1), idempotency s, has key (0/1),
    /// channel ("" to publish nothing), n, event 1 … event n.
    /// Fenced: nothing happens unless `fence` equals the token (one `HMGET` reads fence, seq and
    /// inputSeq; one `HSET` writes state, seq and the next inputSeq). Then, for each event, the id is
    /// max(seq + 1, token * 2^32 + 1), and XADD and SPUBLISH carry the same id and bytes (one
    /// atomic step: a live reader and a replaying reader see the same event; the channel has the
    /// session's hash tag, so the message stays in the script's slot and shard). With replica acks the
    /// caller publishes itself, once replicas hold the commit (no channel here). Returns
    /// {inputSeq or -1, {ids as strings}}.
    static let commit = RedisScript(
        #"""
        local m = redis.call('HMGET', KEYS[1], 'fence', 'seq', 'inputSeq')
        local fence = m[1]
        if not fence then return redis.error_reply('GONE session') end
        if fence ~= ARGV[1] then return redis.error_reply('FENCED token ' .. ARGV[1] .. ' is not ' .. fence) end
        local seq = tonumber(m[2])
        local first = tonumber(ARGV[1]) * 4294967296 + 1
        local n = tonumber(ARGV[9])
        local ids = {}
        for i = 1, n do
          local id = seq + 1
          if id < first then id = first end
          seq = id
          local sid = string.format('%.0f', id)
          redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], sid .. '-0', 'd', ARGV[9 + i])
          if ARGV[8] ~= '' then redis.call('SPUBLISH', ARGV[8], sid .. '\n' .. ARGV[9 + i]) end
          ids[i] = sid
        end
        local inputSeq = -1
        if ARGV[5] == '1' then
          inputSeq = tonumber(m[3]) + 1
          local text = string.format('%.0f', inputSeq)
          redis.call('HSET', KEYS[1], 'state', ARGV[2], 'seq', string.format('%.0f', seq), 'inputSeq', text)
          if ARGV[7] == '1' then redis.call('SET', KEYS[3], text, 'EX', ARGV[6]) end
        else
          redis.call('HSET', KEYS[1], 'state', ARGV[2], 'seq', string.format('%.0f', seq))
        end
        redis.call('EXPIRE', KEYS[1], ARGV[4])
        if n > 0 then redis.call('EXPIRE', KEYS[2], ARGV[4]) end
        return {inputSeq, ids}
        """#)

    /// KEYS: session, events. ARGV: last event id, limit, touch (0/1).
    /// Returns {1} (up to date), {0} (snapshot needed: id not in the history, or more than limit
    /// events missed), or {2, entries}. With touch, the history's expiry is written again as it is (a
    /// write that changes nothing), so a `WAIT` after it covers every commit the answer shows.
    static let replay = RedisScript(
        """
        local seq = redis.call('HGET', KEYS[1], 'seq')
        if not seq then return redis.error_reply('GONE session') end
        if ARGV[3] == '1' then
          local ttl = redis.call('PTTL', KEYS[2])
          if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
        end
        if seq == ARGV[1] then return {1} end
        local last = ARGV[1] .. '-0'
        if #redis.call('XRANGE', KEYS[2], last, last) == 0 then return {0} end
        local limit = tonumber(ARGV[2])
        local entries = redis.call('XRANGE', KEYS[2], '(' .. last, '+', 'COUNT', limit + 1)
        if #entries > limit then return {0} end
        return {2, entries}
        """)

    /// KEYS: idempotency key. The `inputSeq` recorded with an `Idempotency-Key`, or nil; when there is one,
    /// its expiry is written again as it is (a write that changes nothing), so a `WAIT` after it covers the
    /// commit that recorded it (a retry answered from it is acknowledged only once replicas hold it).
    static let acknowledgedInputSeq = RedisScript(
        """
        local v = redis.call('GET', KEYS[1])
        if not v then return false end
        local ttl = redis.call('PTTL', KEYS[1])
        if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
        return v
        """)

    /// KEYS: session, events, lease, streams. ARGV: token. Deletes the session if the token is current.
    static let delete = RedisScript(
        """
        local fence = redis.call('HGET', KEYS[1], 'fence')
        if not fence then return redis.error_reply('GONE session') end
        if fence ~= ARGV[1] then return redis.error_reply('FENCED token ' .. ARGV[1] .. ' is not ' .. fence) end
        return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
        """)
}
