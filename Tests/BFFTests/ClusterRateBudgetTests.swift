import ClusterStore
import Foundation
import GitHubLive
import Logging
import Primitives
import XCTest

@testable import BFF
@testable import SearchApp

/// `ClusterRateBudget` (the node's side of the cluster-wide bucket): which client's share it asks for,
/// which answer it gives, and that it fails open.
final class ClusterRateBudgetTests: XCTestCase {
    /// An `UpstreamBudget` that records each `take`'s client and answers `result`.
    final class RecordingBudget: UpstreamBudget {
        let result: Result<BudgetDecision, StoreError>
        let clients = Lock<[BudgetClient?]>([])
        init(_ result: Result<BudgetDecision, StoreError>) { self.result = result }
        func take(cost: Int, client: BudgetClient?) async -> Result<BudgetDecision, StoreError> {
            clients.withLock { $0.append(client) }
            return result
        }
        func correct(remaining: Int?, blockedUntil: Double?) async -> Result<Void, StoreError> { .success(()) }
        func refund(cost: Int) async -> Result<Void, StoreError> { .success(()) }
    }

    let shape = TokenBucketShape(capacity: 30, refillPerSecond: 0.5)

    func testTheClientsShareOfTheBucketIsAskedForAndAnOverShareAnswerNamesIt() async {
        let budget = ClusterRateBudget(shape: shape, clientShare: 0.5, logger: Logger(label: "t"))
        let refused = RecordingBudget(
            .success(BudgetDecision(allowed: false, remaining: 9, retryAfter: 37.5, refusal: .clientShare)))
        budget.connect(refused)
        let answer = await budget.admit(client: "127.0.0.2")
        XCTAssertEqual(answer, .overShare(seconds: 37.5, cap: 15, limit: 30))
        _ = await budget.admit(client: nil)  // charged to nobody: no share asked for
        XCTAssertEqual(
            refused.clients.withLock { $0 }, [BudgetClient(key: "127.0.0.2", cap: 15, windowSeconds: 60), nil])
        budget.connect(RecordingBudget(.success(BudgetDecision(allowed: false, remaining: 0, retryAfter: 2))))
        let blocked = await budget.admit(client: "127.0.0.2")
        XCTAssertEqual(blocked, .blocked(seconds: 2))
    }

    func testAShareOfOneSendsNoClient() async {
        let budget = ClusterRateBudget(shape: shape, clientShare: 1, logger: Logger(label: "t"))
        let allowed = RecordingBudget(.success(BudgetDecision(allowed: true, remaining: 29, retryAfter: 0)))
        budget.connect(allowed)
        let answer = await budget.admit(client: "127.0.0.2")
        XCTAssertEqual(answer, .admitted)
        XCTAssertEqual(allowed.clients.withLock { $0 }, [nil])
    }

    func testAnUnreachableRedisAdmitsTheCall() async {
        var quiet = Logger(label: "t")
        quiet.logLevel = .critical
        let budget = ClusterRateBudget(shape: shape, clientShare: 0.5, logger: quiet)
        budget.connect(RecordingBudget(.failure(.unavailable("connection refused"))))
        let answer = await budget.admit(client: "127.0.0.2")
        XCTAssertEqual(answer, .admitted, "fail open: the node's own limiter (and its per-client cap) still applies")
    }
}
