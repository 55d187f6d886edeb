extension RedisClient {
    /// Runs `script` with `EVALSHA`, routed by the slot of `keys[0]` (every key must share it on a
    /// cluster: hash tags). When its master answers `NOSCRIPT` (a restarted, flushed or new master after
    /// a failover) it sends `SCRIPT LOAD` and `EVALSHA` again on that connection, pipelined, once: a script
    /// that got `NOSCRIPT` did not run, so it never runs twice. A script that timed out or whose connection
    /// was lost is never retried (it may have run). It takes `lane`'s connection. Loop thread only.
    public func evalScript(
        _ script: RedisScript, keys: [RedisArg], args: [RedisArg], timeout: Double? = nil,
        lane: RedisLane = .commands, _ callback: @escaping Callback
    ) {
        precondition(loop.inEventLoop, "RedisClient.evalScript off its loop")
        let request = Request(
            args: Self.evalSHA(script, keys, args), slot: keys.first.map(Self.slot(of:)), deadline: deadline(timeout),
            script: script, lane: lane
        ) { r, _ in callback(r) }
        route(request)
    }

    /// `evalScript` followed by `WAIT` (see `send(_:key:timeout:waitForReplicas:replicaTimeout:_:)`): for a
    /// commit that must be held by `replicas` replicas before it is acknowledged. Loop thread only.
    public func evalScript(
        _ script: RedisScript, keys: [RedisArg], args: [RedisArg], timeout: Double? = nil,
        waitForReplicas replicas: Int, replicaTimeout: Double,
        _ callback: @escaping (Result<RedisReplicated, RedisError>) -> Void
    ) {
        precondition(loop.inEventLoop, "RedisClient.evalScript off its loop")
        route(
            replicatedRequest(
                Self.evalSHA(script, keys, args), slot: keys.first.map(Self.slot(of:)), timeout, script, replicas,
                replicaTimeout, callback))
    }

    static func evalSHA(_ script: RedisScript, _ keys: [RedisArg], _ args: [RedisArg]) -> [RedisArg] {
        var command: [RedisArg] = []
        command.reserveCapacity(3 + keys.count + args.count)
        command.append("EVALSHA")
        command.append(script.sha1Argument)
        command.append(RedisArg(keys.count))
        command.append(contentsOf: keys)
        command.append(contentsOf: args)
        return command
    }
}
