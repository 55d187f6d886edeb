import RedisClient

/// The token-bucket scripts of `RedisUpstreamBudget`. Time is Redis's `TIME`, so every node sees
/// the same clock; the bucket is one hash {tokens, ts (ms), until (ms)} that expires once it would
/// be full again (an absent bucket is a full one), so it is bounded and never lingers.
enum BudgetScripts {
    /// Shared prologue: `now` in ms and the refilled bucket.
    private static let prologue = """
        \(LuaClock.now)
        local cap = tonumber(ARGV[1])
        local rate = tonumber(ARGV[2]) / 1000
        local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts', 'until')
        local tokens = tonumber(b[1]) or cap
        local ts = tonumber(b[2]) or now
        local blocked = tonumber(b[3]) or 0
        if now > ts then tokens = math.min(cap, tokens + (now - ts) * rate) end
        local function save()
          redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now), 'until', tostring(blocked))
          local ttl = math.ceil((cap - tokens) / rate) + 1000
          if blocked - now + 1000 > ttl then ttl = blocked - now + 1000 end
          redis.call('PEXPIRE', KEYS[1], ttl)
        end

        """

    /// KEYS: bucket [, client counter, askers]. ARGV: capacity, refill per second, cost [, client cap,
    /// window ms, client]. Returns {allowed 0/1, remaining, wait ms, refused for the client's share 0/1}.
    ///
    /// With a client (its counter a STRING, the askers a HASH, both sharing the bucket's hash tag): the
    /// ask is recorded first, whatever the answer (`RecentAskers.record`: {k1, t1} the latest asker,
    /// {k2, t2} the latest ask of another client; `PEXPIRE` one window, after which neither matters). A
    /// client that has started its cap of calls in its window is refused before any token is taken only
    /// while another client asked within the last window (`RecentAskers.contended`), with the ms until
    /// its window ends or that ask is a window old, whichever is first; alone, it is not capped. An
    /// allowed call counts against it (`INCR`; the first call of a window sets its `PEXPIRE`, so the key
    /// goes when the window does). A refused call counts nothing.
    static let take = RedisScript(
        prologue + """
            local ck = KEYS[2]
            local other
            if ck then
              local me = ARGV[6]
              local a = redis.call('HMGET', KEYS[3], 'k1', 't1', 'k2', 't2')
              if a[1] == me then
                other = tonumber(a[4])
                redis.call('HSET', KEYS[3], 't1', now)
              else
                other = tonumber(a[2])
                if a[1] then redis.call('HSET', KEYS[3], 'k2', a[1], 't2', a[2]) end
                redis.call('HSET', KEYS[3], 'k1', me, 't1', now)
              end
              redis.call('PEXPIRE', KEYS[3], ARGV[5])
            end
            if blocked > now then return {0, math.floor(tokens), blocked - now, 0} end
            local cost = tonumber(ARGV[3])
            if ck and other and other + tonumber(ARGV[5]) > now then
              local calls = tonumber(redis.call('GET', ck)) or 0
              if calls >= tonumber(ARGV[4]) then
                local left = redis.call('PTTL', ck)
                if left < 0 then
                  left = tonumber(ARGV[5])
                  redis.call('PEXPIRE', ck, left)
                end
                local lapse = other + tonumber(ARGV[5]) - now
                if lapse < left then left = lapse end
                return {0, math.floor(tokens), left, 1}
              end
            end
            if tokens >= cost then
              tokens = tokens - cost
              save()
              if ck and redis.call('INCR', ck) == 1 then redis.call('PEXPIRE', ck, ARGV[5]) end
              return {1, math.floor(tokens), 0, 0}
            end
            save()
            return {0, math.floor(tokens), math.ceil((cost - tokens) / rate), 0}
            """)

    /// KEYS: bucket. ARGV: capacity, refill per second, remaining (-1: none), blocked until ms (0: none).
    static let correct = RedisScript(
        prologue + """
            local remaining = tonumber(ARGV[3])
            if remaining >= 0 and remaining < tokens then tokens = remaining end
            local untilMs = tonumber(ARGV[4])
            if untilMs > blocked then blocked = untilMs end
            save()
            return 1
            """)

    /// KEYS: bucket. ARGV: capacity, refill per second, cost. Gives back `cost` tokens taken for a call
    /// GitHub did not count (a `304`), never above the capacity. Returns the whole tokens now held.
    static let refund = RedisScript(
        prologue + """
            tokens = math.min(cap, tokens + tonumber(ARGV[3]))
            save()
            return math.floor(tokens)
            """)
}
