import ClusterRedis
import ClusterStore
import EventHTTP
import Foundation
import GitHubSearch
import Logging
import Synchronization

/// Cluster mode's `status`: what this node's gateway reports is posted to the `RedisStatusBoard`
/// (`<prefix>:status:github`, SET + PUBLISH in one script) and every node, this one included, applies
/// what the board announces through `Application.statusUpdater` (the `status` view model and every
/// session's `blockedUntil`). So a rate limit or an outage seen by one node shows on every node.
///
/// Ordering: a node applies its own reports only as they come back from Redis, so every node applies
/// the posts in Redis's order (last post wins). When a post fails (Redis unreachable) the report is
/// applied locally at once, as in single-process mode. On (re)subscription the latest value is read
/// and applied unless it is a block already over.
///
/// Threading: the board belongs to loop 0 (its connection and subscriber); `report` may be called
/// from any thread and hops there.
final class ClusterStatus: Sendable {
    private let board: LoopBound<RedisStatusBoard>
    private let apply: @Sendable (UpstreamStatus) -> Void
    private let logger: Logger
    private let lastApplied = Mutex<UpstreamStatus?>(nil)

    init(cluster: ClusterNode, apply: @escaping @Sendable (UpstreamStatus) -> Void, logger: Logger) {
        let connection = cluster.group.connections[0]
        let board = RedisStatusBoard(
            connection: connection, subscriber: cluster.subscribers[0], name: "github", ttlSeconds: 600,
            keys: ClusterKeys(prefix: cluster.settings.keyPrefix))
        self.board = LoopBound(board, loop: connection.loop)
        self.apply = apply
        self.logger = logger
        connection.loop.execute { [self] in
            board.observe(onSubscribed: { [self] in
                board.latest { [self] r in
                    guard case .success(let bytes?) = r, let s = Self.decode(bytes) else { return }
                    if let until = s.blockedUntil, Double(until) <= Date().timeIntervalSince1970 { return }
                    applyOnce(s)
                }
            }) { [self] bytes in
                if let s = Self.decode(bytes) { applyOnce(s) }
            }
        }
    }

    /// Posts a report of this node's gateway to every node.
    func report(_ status: UpstreamStatus) {
        guard let bytes = try? JSONEncoder().encode(status) else { return apply(status) }
        board.loop.execute { [self] in
            board.value.post(Array(bytes)) { [self] r in
                if case .failure(let e) = r {
                    logger.warning(
                        "status board unavailable; status applied on this node only", metadata: ["error": "\(e)"])
                    applyOnce(status)
                }
            }
        }
    }

    private func applyOnce(_ s: UpstreamStatus) {
        let changed = lastApplied.withLock { last in
            defer { last = s }
            return last != s
        }
        if changed { apply(s) }
    }

    static func decode(_ bytes: [UInt8]) -> UpstreamStatus? {
        try? JSONDecoder().decode(UpstreamStatus.self, from: Data(bytes))
    }
}
