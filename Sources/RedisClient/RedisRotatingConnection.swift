import EventLoop
import Logging

/// A command connection to any one of several nodes (cluster seeds and known nodes, or sentinels): when
/// the node it is on cannot be reached, it moves to the next. Used by the locators to ask for the
/// topology.
///
/// Threading: loop-bound.
final class RedisRotatingConnection {
    private let loop: EventLoop
    private let candidates: () -> [RedisAddress]
    private let configuration: (RedisAddress) -> RedisConfiguration
    private let pause: Double
    private let logger: Logger
    /// Called on the loop each time the connection is ready (on a new node or after a reconnect).
    var onReady: (() -> Void)?
    private(set) var connection: RedisConnection?
    private(set) var address: RedisAddress?
    private var index = -1
    private var failedInARow = 0
    private var timer: LoopTimer?
    private var closed = false

    /// Rotates through `candidates()` (asked again at each move), each reached with `configuration`,
    /// pausing `pause` seconds after a whole round failed.
    init(
        loop: EventLoop, candidates: @escaping () -> [RedisAddress],
        configuration: @escaping (RedisAddress) -> RedisConfiguration, pause: Double, logger: Logger
    ) {
        self.loop = loop
        self.candidates = candidates
        self.configuration = configuration
        self.pause = pause
        self.logger = logger
    }

    /// True when a command can be sent.
    var isReady: Bool { connection?.isAnswering == true }

    func start() { next() }

    func close() {
        closed = true
        timer?.cancel()
        connection?.close()
        connection = nil
    }

    /// Sends on the current node; `.notConnected` when there is none ready.
    func send(_ args: [RedisArg], timeout: Double? = nil, _ callback: @escaping RedisConnection.Callback) {
        guard let connection, connection.state == .ready else { return callback(.failure(.notConnected)) }
        connection.send(args, timeout: timeout, callback)
    }

    /// Leaves the current node for the next (its answers are wrong, or it is gone).
    func moveOn() {
        guard !closed else { return }
        connection?.onStateChange = nil
        connection?.onSilence = nil
        connection?.close()
        connection = nil
        let list = candidates()
        failedInARow += 1
        let delay = failedInARow >= max(1, list.count) ? pause : 0
        if delay > 0 { failedInARow = 0 }
        timer = loop.schedule(after: max(0.001, delay)) { [weak self] in self?.next() }
    }

    private func next() {
        timer = nil
        let list = candidates()
        guard !closed, !list.isEmpty else { return }
        index = (index + 1) % list.count
        let target = list[index]
        address = target
        let config = configuration(target)
        let c = RedisConnection(loop: loop, configuration: config, logger: logger)
        c.healthCheckInterval = max(0.2, config.commandTimeout / 2)
        connection = c
        c.onStateChange = { [weak self, weak c] state in
            guard let self, let c, c === self.connection else { return }
            switch state {
            case .ready:
                self.failedInARow = 0
                self.onReady?()
            case .disconnected: self.moveOn()
            default: break
            }
        }
        c.onSilence = { [weak self, weak c] silent in  // a sentinel that answers nothing: try another
            guard let self, let c, c === self.connection, silent else { return }
            self.moveOn()
        }
        c.start()
    }
}
