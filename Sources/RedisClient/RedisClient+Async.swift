import EventLoop

extension RedisClient {
    /// Starts the client from any thread (hops to its loop).
    public func startFromAnyThread() { loop.execute { [self] in start() } }

    /// Closes the client from any thread and waits until it is closed.
    public func closeFromAnyThread() async {
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                close()
                k.resume()
            }
        }
    }

    /// `send(_:key:timeout:_:)` from any thread or task.
    public func send(_ args: [RedisArg], key: RedisArg?, timeout: Double? = nil) async -> Result<RESPValue, RedisError>
    {
        await withCheckedContinuation { k in
            loop.execute { [self] in send(args, key: key, timeout: timeout) { k.resume(returning: $0) } }
        }
    }

    /// `evalScript(_:keys:args:timeout:_:)` from any thread or task.
    public func evalScript(_ script: RedisScript, keys: [RedisArg], args: [RedisArg], timeout: Double? = nil) async
        -> Result<RESPValue, RedisError>
    {
        await withCheckedContinuation { k in
            loop.execute { [self] in
                evalScript(script, keys: keys, args: args, timeout: timeout) { k.resume(returning: $0) }
            }
        }
    }

    /// `send(_:key:timeout:waitForReplicas:replicaTimeout:_:)` from any thread or task.
    public func send(
        _ args: [RedisArg], key: RedisArg?, timeout: Double? = nil, waitForReplicas replicas: Int,
        replicaTimeout: Double
    ) async -> Result<RedisReplicated, RedisError> {
        await withCheckedContinuation { k in
            loop.execute { [self] in
                send(args, key: key, timeout: timeout, waitForReplicas: replicas, replicaTimeout: replicaTimeout) {
                    k.resume(returning: $0)
                }
            }
        }
    }
}
