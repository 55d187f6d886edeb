import EventLoop
import Foundation
import RedisClient

/// A `RedisClient` for `url` (any of the three forms) on `loop` with its `RedisShardedSubscriber`, both
/// started (tests); returns once the client is ready (or after `within` seconds: check `isReady`).
/// Short reconnect and failover times, so a test that stops Redis runs in seconds.
package func startedClient(
    _ url: String, on loop: EventLoop, commandTimeout: Double = 2, within seconds: Double = 10,
    node: (inout RedisConfiguration) -> Void = { _ in }, configure: (inout RedisClientOptions) -> Void = { _ in }
) async -> (RedisClient, RedisShardedSubscriber) {
    var topology = RedisTopology(url: url)!
    node(&topology.node)
    topology.node.commandTimeout = commandTimeout
    topology.node.reconnectBase = 0.02
    topology.node.reconnectMax = 0.2
    var options = RedisClientOptions()
    configure(&options)
    let client = RedisClient(loop: loop, topology: topology, options: options)
    let subscriber = RedisShardedSubscriber(client: client)
    loop.execute {
        client.start()
        subscriber.start()
    }
    _ = await eventually(within: seconds) { client.isReady }
    return (client, subscriber)
}

/// Closes `subscriber` and its client on their loop and waits (tests).
package func close(_ client: RedisClient, _ subscriber: RedisShardedSubscriber) async {
    await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
        client.loop.execute {
            subscriber.close()
            client.close()
            k.resume()
        }
    }
}

/// Polls `condition` every 5 ms until it holds or `seconds` pass; true if it held (for states that have
/// no event a test can await).
package func eventually(within seconds: Double = 5, _ condition: () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if await condition() { return true }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    return await condition()
}

extension RedisClient {
    /// `send(_:key:)` routed by the command's first argument after its name (`args[1]`, a key for most
    /// commands; any slot for keyless ones on one Redis), from any task (tests).
    package func send(_ args: [RedisArg]) async -> Result<RESPValue, RedisError> {
        await send(args, key: args.count > 1 ? args[1] : nil)
    }
}
