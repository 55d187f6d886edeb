import RedisClient

/// The Lua scripts of `RedisSessionStore`. Each runs atomically in Redis; each checks everything
/// that can fail before its first write (Redis does not roll a script back on error).
enum SessionScripts {
    /// Every script here (loaded on each master as soon as it is connected: `RedisClient.preload`).
    static var all: [RedisScript] {
        [
            create, acquire, admitStream, renewStreamsMany, renewMany, release, commitMany, replay,
            acknowledgedInputSeq,
            delete, deleteIfUnused, load,
        ]
    }

    /// Lua, first in a script: sets the caller's liveness key ARGV[k] for ARGV[ttl] ms and leaves in `lost`
    /// whether it was missing (the caller's liveness had lapsed, or this is its first: `RedisSessionStore`
    /// checks its leases there once). A key this master does not serve (the caller's slot map is out of
    /// date: it names another master's tag) fails the script with `LIVETAG` before anything is written; the
    /// caller, its map mended by the `MOVED` that brought the call here, sends it again.
    private static func setLive(_ k: Int, ttl: Int) -> String {
        """
        local was = redis.pcall('SET', ARGV[\(k)], '1', 'PX', ARGV[\(ttl)], 'GET')
        if type(was) == 'table' and was.err then return redis.error_reply('LIVETAG ' .. was.err) end
        local lost = 0
        if not was then lost = 1 end
        """
    }

    /// KEYS: session. ARGV: holder, state, idle s, the holder's liveness key, lease ms. Creates with fence 1
    /// and the lease "holder|1" (a field of the session's hash: it expires with the session). Returns 1, or 2
    /// if the holder's liveness key was missing (`setLive`).
    static let create = RedisScript(
        """
        #!lua flags=allow-cross-slot-keys
        if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('EXISTS session exists') end
        \(setLive(4, ttl: 5))
        redis.call('HSET', KEYS[1], 'state', ARGV[2], 'seq', '0', 'inputSeq', '0', 'fence', '1', 'lease', ARGV[1] .. '|1')
        redis.call('EXPIRE', KEYS[1], ARGV[3])
        return 1 + lost
        """)

    /// KEYS: session, events. ARGV: holder, lease ms, idle s, new token (0/1), the liveness prefix of this
    /// master (`ClusterKeys.livePrefix`), the holder's own liveness key (`setLive`: set first).
    /// Returns {1, token, state, seq, inputSeq, lost} or {0, holder, pttl}. The lease (the hash's `lease`,
    /// "holder|token") is held while its holder's liveness key here exists: a lease whose holder's key is gone
    /// (its node died or paused past the lease TTL, or its slot moved here from another master) is free. A
    /// new holder gets `HINCRBY fence 1`; the holder itself keeps its token unless it asks for a new one
    /// (ARGV[4] = 1: it no longer runs the session) or the fence has passed it (its commits would be
    /// fenced). Every attempt, granted or not, gives the session and its history their idle expiry again (an
    /// attempt means the session is in use: an input here, a stream here of a session run elsewhere), so a
    /// streamed session costs one round trip per check.
    static let acquire = RedisScript(
        """
        #!lua flags=allow-cross-slot-keys
        local m = redis.call('HMGET', KEYS[1], 'fence', 'lease', 'state', 'seq', 'inputSeq')
        if not m[1] then return redis.error_reply('GONE session') end
        \(setLive(6, ttl: 2))
        redis.call('EXPIRE', KEYS[1], ARGV[3])
        redis.call('EXPIRE', KEYS[2], ARGV[3])
        local cur = m[2]
        local token
        if cur then
          local sep = string.find(cur, '|[^|]*$')
          local holder = string.sub(cur, 1, sep - 1)
          if holder ~= ARGV[1] then
            local ttl = redis.call('PTTL', ARGV[5] .. holder)
            if ttl ~= -2 then
              if ttl < 0 then ttl = tonumber(ARGV[2]) end
              return {0, holder, ttl}
            end
            token = tostring(redis.call('HINCRBY', KEYS[1], 'fence', 1))
          else
            token = string.sub(cur, sep + 1)
            -- a token the fence has passed (a writer that does not keep `lease`: an older build) is not kept
            if ARGV[4] == '1' or token ~= m[1] then token = tostring(redis.call('HINCRBY', KEYS[1], 'fence', 1)) end
          end
        else
          token = tostring(redis.call('HINCRBY', KEYS[1], 'fence', 1))
        end
        redis.call('HSET', KEYS[1], 'lease', ARGV[1] .. '|' .. token)
        return {1, token, m[3], m[4], m[5], lost}
        """)

    /// Lua: `now` = Redis's clock in ms (`TIME`, one clock for every node), then the members of the set
    /// of open streams `KEYS[key]` whose deadline passed are dropped.
    private static func pruneStreams(key: Int) -> String {
        """
        \(LuaClock.now)
        redis.call('ZREMRANGEBYSCORE', KEYS[\(key)], '-inf', string.format('%.0f', now))
        """
    }

    /// Lua: the loop a stream member `expr` names (`<holder>/<n>`; the whole name if it has no `/`), as
    /// `RedisSessionStore.holder(ofMember:)` reads it.
    private static func memberLoop(_ expr: String) -> String { "(string.match(\(expr), '^(.*)/[^/]*$') or \(expr))" }

    /// Lua: `counted` = the members of the set of open streams `KEYS[key]` that count: those whose loop's
    /// stream-liveness key on this master (`ARGV[prefix]` .. the holder the member names, `<holder>/<n>`)
    /// exists, each loop looked up once. A member of a loop that died counts no more once its key expires
    /// (3 check intervals), though its deadline (a backstop, renewed once per expiry renewal) is further
    /// off; it stays in the set until then, and counts again if its loop's key comes back (Redis lost it
    /// and the loop set it again). A key not served here (the caller's slot map is out of date) counts.
    /// `present`: whether `ARGV[member]` is in the set.
    private static func countLiveStreams(key: Int, prefix: Int, member: Int) -> String {
        """
        local counted, alive, present = 0, {}, false
        for _, m in ipairs(redis.call('ZRANGE', KEYS[\(key)], 0, -1)) do
          if m == ARGV[\(member)] then present = true end
          local h = \(memberLoop("m"))
          local a = alive[h]
          if a == nil then
            a = redis.pcall('EXISTS', ARGV[\(prefix)] .. h) ~= 0
            alive[h] = a
          end
          if a then counted = counted + 1 end
        end
        """
    }

    /// KEYS: session, streams, events. ARGV: member, limit, deadline ms, idle s, the stream-liveness prefix
    /// of this master (`ClusterKeys.streamLivePrefix`), stream-liveness ms.
    /// The cluster-wide stream limit: drops the members whose deadline (a score, Redis ms) passed, counts
    /// those whose loop is alive (`countLiveStreams`), then adds `member` with the deadline now + ARGV[3] if
    /// it is there already or fewer than `limit` count, and sets its own loop's stream-liveness key (PX
    /// ARGV[6]; its loop renews it once per check interval). 1 if admitted, 0 if refused; `GONE` if the
    /// session does not exist. An admitted stream
    /// marks the session `used` (a field of its hash): it is no longer an unused session (`deleteIfUnused`);
    /// and gives the session and its history their idle expiry again (an open stream keeps a session alive:
    /// the periodic checks renew it only once per renewal interval).
    static let admitStream = RedisScript(
        """
        #!lua flags=allow-cross-slot-keys
        if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('GONE session') end
        \(pruneStreams(key: 2))
        \(countLiveStreams(key: 2, prefix: 5, member: 1))
        if not present and counted >= tonumber(ARGV[2]) then
          return 0
        end
        redis.pcall('SET', ARGV[5] .. \(memberLoop("ARGV[1]")), '1', 'PX', ARGV[6])
        local ttl = tonumber(ARGV[3])
        redis.call('ZADD', KEYS[2], string.format('%.0f', now + ttl), ARGV[1])
        redis.call('PEXPIRE', KEYS[2], string.format('%.0f', math.max(tonumber(ARGV[4]) * 1000, ttl)))
        redis.call('HSETNX', KEYS[1], 'used', '1')
        redis.call('EXPIRE', KEYS[1], ARGV[4])
        redis.call('EXPIRE', KEYS[3], ARGV[4])
        return 1
        """)

    /// Streamed sessions' periodic check, several sessions a call (`RedisSessionStore.checkStreams` batches
    /// a loop's checks per master). KEYS: the first session (it routes the call). ARGV: idle s, n, the
    /// liveness prefix of this master (`ClusterKeys.livePrefix`), the caller's stream-liveness key here
    /// (`ClusterKeys.streamLive`: set for stream-liveness ms, the next argument, so its members count), then
    /// per session: session, events, streams, deadline ms, renew (1/0), m, member 1 … member m. For each
    /// session: with renew 1 the idle expiry of the session, its history and its set of streams again, and
    /// the expired stream members dropped; the m members given the deadline now + its deadline ms (added
    /// again if they were dropped); answers {the lease's holder (false if no lease, or if its holder's
    /// liveness key here is gone; a key this master does not serve leaves the holder named), seq}, or `GONE`
    /// if no session. Expired members are dropped only with renew (once per expiry renewal, not every
    /// check): every script that counts the set (`admitStream`, `deleteIfUnused`) drops them first itself,
    /// so here it only keeps the set small, and a check without it costs Redis one command less. A holder's
    /// liveness key is looked at once per call, however many of its sessions the call checks (a loop's
    /// streamed sessions are mostly run by a few loops). As in `renewMany`, the keys
    /// are arguments and every session is read first: one not served here fails the call with `CROSSSLOT`
    /// before any write (the caller sends it again per slot).
    static let renewStreamsMany = RedisScript(
        """
        #!lua flags=allow-cross-slot-keys
        \(LuaClock.now)
        local idle = ARGV[1]
        local n = tonumber(ARGV[2])
        local live = ARGV[3]
        redis.pcall('SET', ARGV[4], '1', 'PX', ARGV[5])
        local at, found, alive = {}, {}, {}
        local i = 6
        for c = 1, n do
          local e = redis.pcall('HMGET', ARGV[i], 'seq', 'lease')
          if e.err then return redis.error_reply('CROSSSLOT stream check batch: ' .. e.err) end
          at[c], found[c] = i, e
          i = i + 6 + tonumber(ARGV[i + 5])
        end
        local cutoff = string.format('%.0f', now)
        local out = {}
        for c = 1, n do
          local b = at[c]
          local seq, cur = found[c][1], found[c][2]
          if not seq then
            out[c] = redis.error_reply('GONE session')
          else
            local renew = ARGV[b + 4] == '1'
            if renew then
              redis.call('EXPIRE', ARGV[b], idle)
              redis.call('EXPIRE', ARGV[b + 1], idle)
            end
            if renew then redis.call('ZREMRANGEBYSCORE', ARGV[b + 2], '-inf', cutoff) end
            local ttl, m = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 5])
            if m > 0 then
              local deadline = string.format('%.0f', now + ttl)
              local added = 0
              for k = 1, m do added = added + redis.call('ZADD', ARGV[b + 2], deadline, ARGV[b + 5 + k]) end
              -- a member added again may have made the set anew: it gets an expiry too
              if renew or (added > 0 and redis.call('PTTL', ARGV[b + 2]) < ttl) then
                redis.call('PEXPIRE', ARGV[b + 2], string.format('%.0f', math.max(tonumber(idle) * 1000, ttl)))
              end
            end
            local holder = false
            if cur then
              holder = string.sub(cur, 1, string.find(cur, '|[^|]*$') - 1)
              -- a key not served here (the caller's slot map is out of date) says nothing: the holder stays
              local a = alive[holder]
              if a == nil then
                a = redis.pcall('EXISTS', live .. holder) ~= 0
                alive[holder] = a
              end
              if not a then holder = false end
            end
            out[c] = {holder, seq}
          end
        end
        return out
        """)

    /// KEYS: the first session (it routes the call). ARGV: n, session 1 … session n, "holder|token" 1 … n.
    /// {1 if the session's lease is exactly its "holder|token", 0 if not, …}: a holder checks its leases
    /// one by one only after its liveness key was found gone (`RedisSessionStore.renew`); it changes
    /// nothing. On a Redis Cluster the sessions of one call may be in several slots of one master: as in
    /// `commitMany`, they are arguments, and if one is not served here the call fails with `CROSSSLOT`
    /// (the caller sends it again per slot).
    static let renewMany = RedisScript(
        """
        #!lua flags=allow-cross-slot-keys
        local n = tonumber(ARGV[1])
        local out = {}
        for i = 1, n do
          local v = redis.pcall('HGET', ARGV[1 + i], 'lease')
          if type(v) == 'table' and v.err then return redis.error_reply('CROSSSLOT renewal batch: ' .. v.err) end
          if v == ARGV[1 + n + i] then out[i] = 1 else out[i] = 0 end
        end
        return out
        """)

    /// KEYS: session. ARGV: "holder|token". 1 if released (hand-over), 0 if it was not ours.
    static let release = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[1] then return 0 end
        return redis.call('HDEL', KEYS[1], 'lease')
        """)

    /// A batch of commits, each for itself (`RedisSessionStore.commit`: the commits of one loop iteration
    /// to one master, in the order they were asked for).
    /// KEYS: the first commit's session (it routes the call). ARGV: history max, expiry s, idempotency s,
    /// the number of commits, then for each: session, events, idempotency key (or any key of the session
    /// when unused), token, state, is input (0/1), key flags (0 no key, 1 a key; 2 and 3 the same, its keys
    /// looked at first: on a Redis Cluster), channel ("" to publish nothing), renews the expiry (0/1:
    /// `SessionCommit.renewsExpiry`), n, event 1 … event n. On a Redis Cluster a script's
    /// declared keys must share one slot (`CROSSSLOT` otherwise, `allow-cross-slot-keys` or not): the other
    /// sessions' keys are arguments, which the flag lets the script use when this master serves their
    /// slots. Every session is read first (`pcall`), and on a Redis Cluster (key flags 2, 3) its history and
    /// its idempotency key too (one `EXISTS` of the hash with them: while a slot moves, Redis answers a
    /// command over several of its keys `TRYAGAIN` unless all are on this side): if one is not served here
    /// (the caller's slot map is out of date; a slot is moving and the key has left, or has not come yet, or,
    /// new, would be made on the wrong side), the call fails with `CROSSSLOT` before anything is written, and
    /// the caller sends the batch again one slot at a time.
    /// (Reading only the hash let a commit during `redis-cli --cluster reshard` write its event and
    /// `inputSeq`, then fail on its new idempotency key, "non local key": its keyed retry was applied a
    /// second time. A single Redis or a Sentinel set moves no slot: no `EXISTS` there.)
    /// Each commit is fenced on its own: nothing of it happens unless its session's `fence` equals its token
    /// (one `HMGET` reads fence, seq and inputSeq; one `HSET` writes state, seq and the next inputSeq; a
    /// second commit of the same session in the batch sees the first one's), and a refused commit leaves the
    /// others as they are. For each event the id is max(seq + 1, token * 2^32 + 1), and XADD and SPUBLISH
    /// carry the same id and bytes (one atomic step: a live reader and a replaying reader see the same
    /// event; the channel has the session's hash tag, so the message stays in its slot and shard). The
    /// history is trimmed with `MAXLEN ~`: Redis drops whole nodes of the stream only, so it keeps at least
    /// the newest `history max` events and at most a node more (`stream-node-max-entries` 100, 4 KB);
    /// exact trimming removed one entry from the oldest node per append, a large share of the whole
    /// commit (docs/BENCHMARKS.md). `replay` answers as if it were exact. With
    /// replica acks the caller publishes itself, once replicas hold the batch (no channel here). Returns one
    /// answer per commit: {inputSeq or -1, {ids as strings}}, or the error `GONE` or `FENCED` for that
    /// commit alone. A commit that does not renew the expiry leaves it as the last renewal set it; its
    /// first event of a history that does not exist yet (`XADD NOMKSTREAM` adds nothing) creates it with
    /// the expiry, so no key of a session is ever without one. A renewing commit renews the history's
    /// expiry with the hash's, events or not: both keys always expire together.
    static let commitMany = RedisScript(
        #"""
        #!lua flags=allow-cross-slot-keys
        local count = tonumber(ARGV[4])
        local at, read = {}, {}
        local a = 5
        for c = 1, count do
          at[c] = a
          local key = ARGV[a]
          if not read[key] then
            local m = redis.pcall('HMGET', key, 'fence', 'seq', 'inputSeq')
            if m.err then return redis.error_reply('CROSSSLOT commit batch: ' .. m.err) end
            read[key] = m
          end
          local kf = ARGV[a + 6]
          if kf == '2' or kf == '3' then
            local e
            if kf == '3' then
              e = redis.pcall('EXISTS', key, ARGV[a + 1], ARGV[a + 2])
            else
              e = redis.pcall('EXISTS', key, ARGV[a + 1])
            end
            if type(e) == 'table' and e.err then return redis.error_reply('CROSSSLOT commit batch: ' .. e.err) end
          end
          a = a + 10 + tonumber(ARGV[a + 9])
        end
        local out = {}
        for c = 1, count do
          local a = at[c]
          local key, token, n = ARGV[a], ARGV[a + 3], tonumber(ARGV[a + 9])
          local m = read[key]
          local fence = m[1]
          if not fence then
            out[c] = redis.error_reply('GONE session')
          elseif fence ~= token then
            out[c] = redis.error_reply('FENCED token ' .. token .. ' is not ' .. fence)
          else
            local seq = tonumber(m[2])
            local first = tonumber(token) * 4294967296 + 1
            local channel, renew = ARGV[a + 7], ARGV[a + 8] == '1'
            local ids = {}
            for i = 1, n do
              local id = seq + 1
              if id < first then id = first end
              seq = id
              local sid = string.format('%d', id)
              local event = ARGV[a + 9 + i]
              if renew then
                redis.call('XADD', ARGV[a + 1], 'MAXLEN', '~', ARGV[1], sid .. '-0', 'd', event)
              elseif not redis.call('XADD', ARGV[a + 1], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[1], sid .. '-0', 'd', event) then
                redis.call('XADD', ARGV[a + 1], 'MAXLEN', '~', ARGV[1], sid .. '-0', 'd', event)
                redis.call('EXPIRE', ARGV[a + 1], ARGV[2])
              end
              if channel ~= '' then redis.call('SPUBLISH', channel, sid .. '\n' .. event) end
              ids[i] = sid
            end
            if n > 0 then m[2] = ids[n] end
            local inputSeq = -1
            if ARGV[a + 5] == '1' then
              inputSeq = tonumber(m[3]) + 1
              m[3] = string.format('%d', inputSeq)
              redis.call('HSET', key, 'state', ARGV[a + 4], 'seq', m[2], 'inputSeq', m[3])
              if ARGV[a + 6] == '1' or ARGV[a + 6] == '3' then redis.call('SET', ARGV[a + 2], m[3], 'EX', ARGV[3]) end
            else
              redis.call('HSET', key, 'state', ARGV[a + 4], 'seq', m[2])
            end
            if renew then
              redis.call('EXPIRE', key, ARGV[2])
              redis.call('EXPIRE', ARGV[a + 1], ARGV[2])
            end
            out[c] = {inputSeq, ids}
          end
        end
        return out
        """#)

    /// KEYS: session, events. ARGV: last event id, limit, touch (0/1).
    /// Returns {1} (up to date), {0} (snapshot needed: id not in the history, or `limit` or more events
    /// after it: as if the history held exactly the newest `limit`, `--history-events`, though `MAXLEN ~`
    /// may keep a few more), or {2, entries}. With touch, the history's expiry is written again as it is (a
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
        local entries = redis.call('XRANGE', KEYS[2], '(' .. last, '+', 'COUNT', limit)
        if #entries >= limit then return {0} end
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

    /// KEYS: session. `GET /state`'s read (on any node): {state, seq, inputSeq} (nils if no session). A read
    /// changes nothing: it does not make a session used (only inputs and streams do, as in single-process
    /// mode), so a session only polled is still unused (`deleteIfUnused`).
    static let load = RedisScript(
        """
        local m = redis.call('HMGET', KEYS[1], 'state', 'seq', 'inputSeq')
        return {m[1], m[2], m[3]}
        """)

    /// KEYS: session, events, streams. ARGV: token. The end of a session its owner found unused
    /// (`--unused-session-timeout`: no input, no stream, however often read): deleted, 1, if the token is
    /// current and it is unused across the cluster too — no input ever (`inputSeq` 0), no stream ever
    /// admitted on any node (`used`), none open now (the set of open streams, deadlines passed dropped
    /// first); else 0 and nothing changes (the caller releases the lease: a node streaming it takes it over).
    static let deleteIfUnused = RedisScript(
        """
        local m = redis.call('HMGET', KEYS[1], 'fence', 'inputSeq', 'used')
        if not m[1] then return redis.error_reply('GONE session') end
        if m[1] ~= ARGV[1] then return redis.error_reply('FENCED token ' .. ARGV[1] .. ' is not ' .. m[1]) end
        if m[2] ~= '0' or m[3] then return 0 end
        \(pruneStreams(key: 3))
        if redis.call('ZCARD', KEYS[3]) > 0 then return 0 end
        redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
        return 1
        """)

    /// KEYS: session, events, streams. ARGV: token. Deletes the session if the token is current.
    static let delete = RedisScript(
        """
        local fence = redis.call('HGET', KEYS[1], 'fence')
        if not fence then return redis.error_reply('GONE session') end
        if fence ~= ARGV[1] then return redis.error_reply('FENCED token ' .. ARGV[1] .. ' is not ' .. fence) end
        return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
        """)
}

/// Scripts that read the session store for operators (`bff session-owner`): sent with `EVAL`, never
/// preloaded (a node does not run them).
package enum SessionInspectionScripts {
    /// The PTTL of the liveness key (prefix ARGV[1]) of the holder named by session KEYS[1]'s lease; -2
    /// when there is no lease or no such key. Reads only. The lease is `holder|fence`
    /// (`SessionScripts.create`, `acquire`), the liveness key `ClusterKeys.live(holder:tag:)`.
    package static let leaseHolderLivenessPTTL = """
        #!lua flags=no-writes,allow-cross-slot-keys
        local v = redis.call('HGET', KEYS[1], 'lease')
        if not v then return -2 end
        return redis.call('PTTL', ARGV[1] .. string.sub(v, 1, string.find(v, '|[^|]*$') - 1))
        """
}
