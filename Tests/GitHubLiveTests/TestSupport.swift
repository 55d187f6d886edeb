import Foundation
import GitHubLive
import GitHubSearch
import Logging
import XCTest

/// A wall clock the test moves by hand.
final class ManualClock: WallClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Double
    init(_ start: Double = 1_700_000_000) { current = start }
    func now() -> Double { lock.withLock { current } }
    func advance(_ seconds: Double) { lock.withLock { current += seconds } }
}

/// Thread-safe list of anything a callback hands out.
final class Recorder<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    func append(_ item: T) { lock.withLock { items.append(item) } }
    var all: [T] { lock.withLock { items } }
}

/// A LogHandler that keeps every message (to prove what was and was not logged).
struct CapturingLogHandler: LogHandler {
    let lines: Recorder<String>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        lines.append("\(event.level) \(event.message) \(merged)")
    }
}

func capturingLogger() -> (Logger, Recorder<String>) {
    let lines = Recorder<String>()
    return (Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }, lines)
}

/// A scripted upstream: answers from `script` in order, fails the test loudly when it runs out,
/// and can hold every call until `release()` so concurrency can be observed without sleeps.
actor FakeSearch: ConditionalRepositorySearching {
    var script: [Result<ConditionalFetch, SearchError>]
    private(set) var calls: [(SearchRequest, String?)] = []
    var holding = false
    private var held: [CheckedContinuation<Void, Never>] = []
    private var callWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
    let conditional: Bool

    init(_ script: [Result<ConditionalFetch, SearchError>] = [], conditional: Bool = false) {
        self.script = script
        self.conditional = conditional
    }

    func push(_ result: Result<ConditionalFetch, SearchError>) { script.append(result) }
    func hold() { holding = true }
    func release() {
        holding = false
        let h = held
        held = []
        for continuation in h { continuation.resume() }
    }
    var callCount: Int { calls.count }

    /// Returns once at least `n` calls have arrived.
    func waitForCalls(_ n: Int) async {
        if calls.count >= n { return }
        await withCheckedContinuation { callWaiters.append((n, $0)) }
    }

    func fetch(_ request: SearchRequest, ifNoneMatch etag: String?) async throws(SearchError) -> ConditionalFetch {
        calls.append((request, conditional ? etag : nil))
        let ready = callWaiters.filter { $0.0 <= calls.count }
        callWaiters.removeAll { $0.0 <= calls.count }
        for waiter in ready { waiter.1.resume() }
        if holding { await withCheckedContinuation { held.append($0) } }
        guard !script.isEmpty else {
            XCTFail("FakeSearch called without a scripted answer for \(request)")
            throw .upstream(message: "unstubbed")
        }
        return try script.removeFirst().get()
    }

    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        switch try await fetch(request, ifNoneMatch: nil) {
        case .modified(let page, _): return SearchResponse(page: page, cache: .miss)
        case .notModified: throw .upstream(message: "304")
        }
    }
}

/// A non-conditional wrapper, to test the plain `RepositorySearching` path of the cache.
struct PlainSearch: RepositorySearching {
    let fake: FakeSearch
    func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        try await fake.search(request, policy: policy)
    }
}

func samplePage(_ marker: String, count: Int = 3, page: Int = 1, descriptionBytes: Int = 10) -> SearchPage {
    let repos = (0..<count).map { i in
        Repository(
            id: i + 1, fullName: "\(marker)/repo\(i)", owner: marker, avatarURL: "https://a/\(marker)",
            description: String(repeating: "d", count: descriptionBytes), language: "Swift", stars: 100 - i, forks: i,
            topics: ["t"], htmlURL: "https://github.com/\(marker)/repo\(i)", updatedAt: "2024-01-01T00:00:00Z")
    }
    return SearchPage(totalCount: 1234, incompleteResults: false, repositories: repos, page: page, hasMore: true)
}

func tempPath(_ name: String) -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bff-tests-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir.appendingPathComponent(name).path
}
