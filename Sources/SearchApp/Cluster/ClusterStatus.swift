import BFF
import ClusterRedis
import ClusterStore
import EventHTTP
import Foundation
import GitHubSearch
import Logging
import Synchronization

/// Cluster mode's `status`: what this node's gateway reports is posted to the `RedisStatusBoard`
/// (`<prefix>:status:{github}`, SET + SPUBLISH in one script) and every node, this one included, applies
/// what the board announces through `StatusFanOut` (the `status` view model and every
/// session's `blockedUntil`). So a rate limit or an outage seen by one node shows on every node.
///
/// Ordering: a node applies its own reports only as they come back from Redis, so every node applies
/// the posts in Redis's order (last post wins). When a post fails (Redis unreachable) the report is
/// applied locally at once, as in single-process mode. The gateway's limiter reports repeats too in
/// cluster mode (`publishesRepeats`): the board's last post may be another node's since its last
/// report. On (re)subscription the latest value is read and applied unless it is a block already over;
/// a read that fails (Redis slow or unreachable) is tried again every `catchUpRetry` seconds until one
/// answers or a later subscription reads instead, so a post announced while the subscription was down
/// still reaches this node.
///
/// A block ends by itself: applying a reachable status with a `blockedUntil` arms a timer that applies
/// "reachable, no message" (the rate limit kept) at that time, unless another post was applied
/// meanwhile. So the `status` message of a block does not outlive it when its poster dies before the
/// block ends (the poster's own limiter would have posted the same "available" at that time).
///
/// Threading: the board belongs to one loop (loop 0's connection and subscriber); `report` may be called
/// from any thread and hops there; everything else (applying, the timer) runs there.
final class ClusterStatus: Sendable {
    /// The wall clock (seconds since 1970) `blockedUntil` is compared with.
    typealias WallTime = @Sendable () -> Double

    private let board: LoopBound<any StatusBoard>
    private let apply: @Sendable (UpstreamStatus) -> Void
    private let logger: Logger
    private let now: WallTime
    /// What this node last applied and the cancellation of the timer that ends its block (loop only).
    private let applied: LoopBound<Applied>

    private struct Applied {
        var last: UpstreamStatus?
        var cancelExpiry: (() -> Void)?
        /// Subscriptions confirmed so far: only the latest one's read is tried again.
        var subscriptions = 0
        /// The timer facility (a loop thing, so kept with the loop's state).
        let schedule: ScheduledLeaseTimers.Schedule
    }

    /// The board of `cluster` (`<prefix>:status:{github}` on loop 0), its time the system's.
    convenience init(cluster: ClusterNode, apply: @escaping @Sendable (UpstreamStatus) -> Void, logger: Logger) {
        let client = cluster.clients[0]
        let board = RedisStatusBoard(
            client: client, subscriber: cluster.subscribers[0], name: "github", ttlSeconds: 600,
            keys: ClusterKeys(prefix: cluster.settings.keyPrefix))
        let loop = client.loop
        self.init(
            board: board, loop: loop, apply: apply, logger: logger, now: { Date().timeIntervalSince1970 },
            schedule: { seconds, work in
                let t = loop.schedule(after: seconds, work)
                return { t.cancel() }
            })
    }

    /// Follows `board` (bound to `loop`), applying its values with `apply`. Time is injected: `now` is
    /// the wall clock, `schedule` runs work on `loop` after some seconds (tests drive both by hand).
    init(
        board: any StatusBoard, loop: EventLoop, apply: @escaping @Sendable (UpstreamStatus) -> Void, logger: Logger,
        now: @escaping WallTime, schedule: @escaping ScheduledLeaseTimers.Schedule
    ) {
        self.board = LoopBound(board, loop: loop)
        self.apply = apply
        self.logger = logger
        self.now = now
        self.applied = LoopBound(Applied(schedule: schedule), loop: loop)
        loop.execute { [self] in
            let board = self.board.value
            board.observe(onSubscribed: { [self] in
                applied.value.subscriptions += 1
                catchUp(after: applied.value.subscriptions)
            }) { [self] bytes in
                if let s = Self.decode(bytes) { applyOnce(s) }
            }
        }
    }

    /// Seconds between reads of the latest value while they fail.
    static let catchUpRetry = 1.0

    /// Reads the board's latest value after subscription `number` and applies it; tried again while the
    /// read fails, until it answers or a later subscription takes over.
    private func catchUp(after number: Int) {
        board.value.latest { [self] r in
            guard applied.value.subscriptions == number else { return }
            switch r {
            case .success(let bytes?):
                guard let s = Self.decode(bytes) else { return }
                if let until = s.blockedUntil, Double(until) <= now() { return }
                applyOnce(s)
            case .success(nil):
                return
            case .failure:
                _ = applied.value.schedule(Self.catchUpRetry) { [self] in
                    guard applied.value.subscriptions == number else { return }
                    catchUp(after: number)
                }
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

    /// Applies `s` unless it is what was last applied; a new value replaces the pending end of a block.
    private func applyOnce(_ s: UpstreamStatus) {
        guard applied.value.last != s else { return }
        applied.value.last = s
        applied.value.cancelExpiry?()
        applied.value.cancelExpiry = nil
        apply(s)
        if s.reachable, let until = s.blockedUntil { armExpiry(of: s, at: Double(until)) }
    }

    /// At `until` (wall time), applies the end of the block `s` if `s` is still the last value applied.
    private func armExpiry(of s: UpstreamStatus, at until: Double) {
        applied.value.cancelExpiry = applied.value.schedule(max(0, until - now())) { [self] in
            applied.value.cancelExpiry = nil
            guard applied.value.last == s else { return }
            if until > now() { return armExpiry(of: s, at: until) }  // the timer ran ahead of the wall clock
            applyOnce(UpstreamStatus(reachable: true, message: nil, rateLimit: s.rateLimit))
        }
    }

    static func decode(_ bytes: [UInt8]) -> UpstreamStatus? {
        try? JSONDecoder().decode(UpstreamStatus.self, from: Data(bytes))
    }
}
