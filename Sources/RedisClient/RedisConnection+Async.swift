import EventLoop

extension RedisConnection {
    /// Sends a command from any thread or task: hops to the connection's loop and back.
    public func send(_ args: [RedisArg], timeout: Double? = nil) async -> Result<RESPValue, RedisError> {
        await withCheckedContinuation { continuation in
            loop.execute { [self] in
                send(args, timeout: timeout) { continuation.resume(returning: $0) }
            }
        }
    }

    /// Runs a script (`evalScript`) from any thread or task: hops to the connection's loop and back.
    public func evalScript(_ script: RedisScript, keys: [RedisArg], args: [RedisArg], timeout: Double? = nil) async
        -> Result<RESPValue, RedisError>
    {
        await withCheckedContinuation { continuation in
            loop.execute { [self] in
                evalScript(script, keys: keys, args: args, timeout: timeout) { continuation.resume(returning: $0) }
            }
        }
    }

    /// Starts the connection from any thread (hops to its loop).
    public func startFromAnyThread() { loop.execute { [self] in start() } }

    /// Closes the connection from any thread (hops to its loop) and waits until it is closed.
    public func closeFromAnyThread() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                close()
                c.resume()
            }
        }
    }
}
