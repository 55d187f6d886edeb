import Foundation
import GitHubSearch
import XCTest

@testable import GitHubLive

/// The SQLite file behind the cache: restarts, corruption.
final class SearchCachePersistenceTests: XCTestCase {
    let swift = SearchRequest(query: "swift language:swift", sort: .stars, order: .asc, page: 2, perPage: 50)

    func testEntriesSurviveARestart() async throws {
        let path = tempPath("cache.sqlite")
        let clock = ManualClock()
        do {
            let fake = FakeSearch([.success(.modified(samplePage("disk"), etag: "\"e1\""))], conditional: true)
            let cache = SearchCache(upstream: fake, configuration: .init(path: path), clock: clock)
            _ = try await cache.search(swift)
            await cache.flush()
        }
        clock.advance(10)
        // Nothing else stubbed: a call for a hit fails loudly.
        let fake = FakeSearch([.success(.notModified)], conditional: true)
        let restarted = SearchCache(upstream: fake, configuration: .init(path: path), clock: clock)
        let count = await restarted.count
        XCTAssertEqual(count, 1)
        let hit = try await restarted.search(swift)
        XCTAssertEqual(hit, SearchResponse(page: samplePage("disk"), cache: .hit))
        clock.advance(60)
        let r = try await restarted.search(swift, policy: .revalidate)
        XCTAssertEqual(r.cache, .revalidated)
        let calls = await fake.calls
        XCTAssertEqual(calls.map(\.1), ["\"e1\""], "the ETag survived the restart")
    }

    func testEvictionIsPersisted() async throws {
        let path = tempPath("cache.sqlite")
        let clock = ManualClock()
        let fake = FakeSearch([
            .success(.modified(samplePage("a"), etag: nil)), .success(.modified(samplePage("b"), etag: nil)),
        ])
        let cache = SearchCache(upstream: fake, configuration: .init(maxEntries: 1, path: path), clock: clock)
        _ = try await cache.search(SearchRequest(query: "a"))
        _ = try await cache.search(SearchRequest(query: "b"))
        await cache.flush()
        // Restart with room for more: only the file's contents decide, so "a" must be gone from it.
        let restarted = SearchCache(
            upstream: FakeSearch(), configuration: .init(maxEntries: 10, path: path), clock: clock)
        let count = await restarted.count
        XCTAssertEqual(count, 1)
        let b = try await restarted.search(SearchRequest(query: "b"))
        XCTAssertEqual(b.page, samplePage("b"))
    }

    func testRestartTrimsToSmallerBoundsAndDropsExpired() async throws {
        let path = tempPath("cache.sqlite")
        let clock = ManualClock()
        let fake = FakeSearch((0..<3).map { .success(.modified(samplePage("p\($0)"), etag: nil)) })
        let cache = SearchCache(upstream: fake, configuration: .init(path: path), clock: clock)
        for q in ["a", "b", "c"] {
            _ = try await cache.search(SearchRequest(query: q))
            clock.advance(100)
        }
        await cache.flush()
        let smaller = SearchCache(
            upstream: FakeSearch(), configuration: .init(ttl: 1000, maxEntries: 2, path: path), clock: clock)
        let kept = await smaller.count
        XCTAssertEqual(kept, 2)
        let c = try await smaller.search(SearchRequest(query: "c"), policy: .useCache)
        XCTAssertEqual(c, SearchResponse(page: samplePage("p2"), cache: .hit), "the most recent entries were kept")
        clock.advance(86_400)
        let expired = SearchCache(upstream: FakeSearch(), configuration: .init(path: path), clock: clock)
        let left = await expired.count
        XCTAssertEqual(left, 0, "entries past maxAge are not loaded")
    }

    func testCorruptFileIsLoggedAndRebuilt() async throws {
        let path = tempPath("cache.sqlite")
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        let (logger, lines) = capturingLogger()
        let clock = ManualClock()
        let fake = FakeSearch([.success(.modified(samplePage("fresh"), etag: nil))])
        let cache = SearchCache(upstream: fake, configuration: .init(path: path), clock: clock, logger: logger)
        XCTAssertTrue(lines.all.contains { $0.contains("error") && $0.contains("rebuilding") }, "\(lines.all)")
        let count = await cache.count
        XCTAssertEqual(count, 0)
        let miss = try await cache.search(swift)
        XCTAssertEqual(miss.cache, .miss)
        await cache.flush()
        let restarted = SearchCache(upstream: FakeSearch(), configuration: .init(path: path), clock: clock)
        let hit = try await restarted.search(swift)
        XCTAssertEqual(hit, SearchResponse(page: samplePage("fresh"), cache: .hit), "the rebuilt file works")
    }

    func testUnwritableLocationFallsBackToMemory() async throws {
        let (logger, lines) = capturingLogger()
        let fake = FakeSearch([.success(.modified(samplePage("m"), etag: nil))])
        let cache = SearchCache(
            upstream: fake, configuration: .init(path: "/dev/null/\(UUID())/cache.sqlite"), clock: ManualClock(),
            logger: logger)
        XCTAssertTrue(lines.all.contains { $0.contains("memory only") })
        _ = try await cache.search(swift)
        let hit = try await cache.search(swift)
        XCTAssertEqual(hit.cache, .hit)
    }
}
