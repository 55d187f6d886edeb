extension RedisConnection {
    /// Runs `script` with `EVALSHA`; when Redis answers `NOSCRIPT` (a restarted or flushed server),
    /// sends `SCRIPT LOAD` and `EVALSHA` again, pipelined, once. A script that did not run
    /// (`NOSCRIPT`) is safe to retry, so this never runs a script twice. Loop thread only.
    public func evalScript(
        _ script: RedisScript, keys: [RedisArg], args: [RedisArg], timeout: Double? = nil,
        _ callback: @escaping Callback
    ) {
        var command: [RedisArg] = []
        command.reserveCapacity(3 + keys.count + args.count)
        command.append("EVALSHA")
        command.append(script.sha1Argument)
        command.append(RedisArg(keys.count))
        command.append(contentsOf: keys)
        command.append(contentsOf: args)
        send(command, timeout: timeout) { [self] result in
            guard case .failure(let error) = result, error.serverCode == "NOSCRIPT" else { return callback(result) }
            var loadFailure: RedisError?
            send(["SCRIPT", "LOAD", RedisArg(script.source)], timeout: timeout) { loaded in
                if case .failure(let e) = loaded { loadFailure = e }
            }
            send(command, timeout: timeout) { retried in
                if let loadFailure { return callback(.failure(loadFailure)) }
                callback(retried)
            }
        }
    }
}
