import Foundation
import GitHubSearch
import XCTest

/// A `RepositorySearching` double that answers only what a test stubbed and fails the test on any
/// other call. Stubs answer at once or when their `Gate` is opened (to order racing responses).
final class FakeSearch: RepositorySearching, @unchecked Sendable {
    /// One call: the request and the cache policy.
    struct Call: Equatable, CustomStringConvertible {
        var request: SearchRequest
        var policy: CachePolicy
        var description: String {
            "\(request.query)/\(request.sort.rawValue)/p\(request.page)x\(request.perPage)/\(policy)"
        }
    }

    private let lock = NSLock()
    private var stubs: [(call: Call, gate: Gate)] = []
    private var recorded: [Call] = []

    /// Every call so far, in order.
    var calls: [Call] { lock.withLock { recorded } }
    /// Stubs not yet consumed.
    var unusedStubs: [Call] { lock.withLock { stubs.map(\.call) } }

    /// Answers `request` with `result` as soon as it is asked.
    func stub(_ request: SearchRequest, policy: CachePolicy = .useCache, _ result: Result<SearchResponse, SearchError>)
    {
        let gate = Gate()
        gate.open(result)
        lock.withLock { stubs.append((Call(request: request, policy: policy), gate)) }
    }

    /// Answers `request` when the returned gate is opened.
    func stubGated(_ request: SearchRequest, policy: CachePolicy = .useCache) -> Gate {
        let gate = Gate()
        lock.withLock { stubs.append((Call(request: request, policy: policy), gate)) }
        return gate
    }

    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        let call = Call(request: request, policy: policy)
        let gate: Gate? = lock.withLock {
            recorded.append(call)
            guard let i = stubs.firstIndex(where: { $0.call == call }) else { return nil }
            return stubs.remove(at: i).gate
        }
        guard let gate else {
            XCTFail("FakeSearch: unstubbed call \(call)")
            throw .upstream(message: "unstubbed call \(call)")
        }
        return try await gate.wait().get()
    }
}

/// A one-shot result that a fake's call awaits until the test opens it. A waiting call whose task is
/// cancelled returns `SearchError.cancelled` at once (as the live cache does) and `wasCancelled` says so.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<SearchResponse, SearchError>?
    private var waiter: CheckedContinuation<Result<SearchResponse, SearchError>, Never>?
    private var cancelled = false

    /// True when the call waiting on this gate was cancelled.
    var wasCancelled: Bool { lock.withLock { cancelled } }

    /// Releases the waiting call (or the next one) with `result`.
    func open(_ result: Result<SearchResponse, SearchError>) {
        lock.lock()
        self.result = result
        let w = waiter
        waiter = nil
        lock.unlock()
        w?.resume(returning: result)
    }

    /// The result, once opened; `.cancelled` as soon as the caller's task is cancelled.
    func wait() async -> Result<SearchResponse, SearchError> {
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                lock.lock()
                if cancelled {
                    lock.unlock()
                    c.resume(returning: .failure(.cancelled))
                } else if let result {
                    lock.unlock()
                    c.resume(returning: result)
                } else {
                    waiter = c
                    lock.unlock()
                }
            }
        } onCancel: {
            lock.lock()
            let w = result == nil ? waiter : nil
            if result == nil {
                cancelled = true
                waiter = nil
            }
            lock.unlock()
            w?.resume(returning: .failure(.cancelled))
        }
    }
}
