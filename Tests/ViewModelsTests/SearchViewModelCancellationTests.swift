import Features
import GitHubSearch
import JSON
import ViewModels
import XCTest

/// Superseded and ended work is cancelled (its search leaves at once, its result is dropped), and a
/// rate limit disables searching until `retryAt`, which the view model's own timer clears.
final class SearchViewModelCancellationTests: XCTestCase {
    typealias F = SearchFixtures

    func testSortChangeCancelsTheSearchInFlightAndDropsItsResult() async throws {
        let h = SearchHarness()
        let gateA = h.fake.stubGated(F.request("swift"))
        let gateB = h.fake.stubGated(F.request("swift", .stars))
        try h.send("query", "swift")
        let a = try h.send("submit")
        XCTAssertEqual(
            h.events.take().last, ViewModelEvent(inputSeq: a, outputs: ["searchEnabled": false, "isLoading": true]))
        XCTAssertEqual(h.vm.runningEffects, 1)

        let b = try h.send("sort", "stars")
        XCTAssertEqual(h.events.take(), [ViewModelEvent(inputSeq: b, outputs: ["sort": "stars"])])
        XCTAssertEqual(h.vm.runningEffects, 1, "A was cancelled when B started")

        await h.owner.runNext()  // A's task returns at once (cancelled); its action is dropped
        XCTAssertTrue(gateA.wasCancelled)
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "stars", searchEnabled: false, isLoading: true, repositories: [],
                totalCount: nil, hasMore: false, error: nil, stale: false, loadMoreEnabled: false,
                errorMessage: nil, retryAt: nil))

        gateB.open(F.response([7], total: 1, hasMore: false))
        await h.owner.runNext()
        XCTAssertFalse(gateB.wasCancelled)
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: b,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([7]), "totalCount": 1,
                    ])
            ])
        XCTAssertEqual(h.vm.runningEffects, 0)
        // A's and B's requests, in either order: each runs in a task of its own, and which task reaches
        // the fake first is the scheduler's choice (under ThreadSanitizer, B's sometimes did).
        XCTAssertEqual(h.fake.calls.map(\.request.sort).sorted { $0.rawValue < $1.rawValue }, [.bestMatch, .stars])
        h.verifyDone()
    }

    func testRefreshCancelsTheNextPageInFlight() async throws {
        let h = SearchHarness()
        try await h.show("swift", [1, 2], total: 10, hasMore: true)
        let page2 = h.fake.stubGated(F.request("swift", page: 2))
        try h.send("loadMore")
        _ = h.events.take()
        h.fake.stub(F.request("swift"), policy: .revalidate, F.response([1, 2, 3], total: 10, hasMore: false))
        let refresh = try h.send("refresh")
        XCTAssertEqual(h.events.take(), [])  // still loading: no output changed
        await h.owner.runNext()
        await h.owner.runNext()
        XCTAssertTrue(page2.wasCancelled)
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: refresh,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([1, 2, 3]),
                        "hasMore": false,
                    ])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [1, 2, 3],
                totalCount: 10, hasMore: false, error: nil, stale: false, loadMoreEnabled: false,
                errorMessage: nil, retryAt: nil))
        h.verifyDone()
    }

    func testCloseCancelsTheSearchInFlightAndStartsNoMoreWork() async throws {
        let h = SearchHarness()
        let gate = h.fake.stubGated(F.request("swift"))
        try h.send("query", "swift")
        try h.send("submit")
        _ = h.events.take()
        h.vm.close()
        XCTAssertEqual(h.vm.runningEffects, 0)
        await h.owner.runNext()  // the cancelled search returns; nothing is applied
        XCTAssertTrue(gate.wasCancelled)
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.vm.state.isLoading, true)

        // After close no effect starts: a sort change would search, but the fake (told nothing) is not called.
        try h.send("sort", "forks")
        XCTAssertEqual(h.vm.runningEffects, 0)
        XCTAssertEqual(h.fake.calls.count, 1)
        h.vm.close()  // idempotent
        h.verifyDone()
    }

    func testRateLimitSetsRetryAtAndDisablesSearchAndLoadMoreUntilItsTimerEnds() async throws {
        let h = SearchHarness()
        try await h.show("swift", [1, 2], total: 10, hasMore: true)
        XCTAssertEqual(h.vm.snapshot["loadMoreEnabled"], true)
        h.fake.stub(
            F.request("swift", page: 2),
            .failure(.rateLimited(retryAfterSeconds: 30, message: "GitHub's search rate limit is exhausted.")))
        let more = try h.send("loadMore")
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: more, outputs: ["searchEnabled": false, "isLoading": true, "loadMoreEnabled": false])
            ])
        await h.owner.runNext()
        let errorJSON: JSONValue = [
            "kind": "rateLimited", "message": "GitHub's search rate limit is exhausted.", "retryAfterSeconds": 30,
        ]
        // searchEnabled and loadMoreEnabled stay false; the sentence is not repeated in errorMessage (the
        // status banner says it); retryAt is the clock's time plus 30 s.
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: more,
                    outputs: ["isLoading": false, "error": errorJSON, "retryAt": "2027-01-15T08:00:30Z"])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: false, isLoading: false, repositories: [1, 2],
                totalCount: 10, hasMore: true, error: errorJSON, stale: false, loadMoreEnabled: false,
                errorMessage: nil, retryAt: "2027-01-15T08:00:30Z"))
        XCTAssertEqual(h.vm.runningEffects, 1, "the rate-limit timer")

        // Rate limited: submit and loadMore are no-ops (the fake, told nothing more, is not called).
        try h.send("submit")
        try h.send("loadMore")
        XCTAssertEqual(h.events.take(), [])

        h.clock.advance(29)
        XCTAssertEqual(h.owner.pendingCount, 0)
        h.clock.advance(1)
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [ViewModelEvent(inputSeq: more, outputs: ["searchEnabled": true, "loadMoreEnabled": true, "retryAt": nil])])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [1, 2],
                totalCount: 10, hasMore: true, error: errorJSON, stale: false, loadMoreEnabled: true,
                errorMessage: nil, retryAt: nil))

        h.fake.stub(F.request("swift", page: 2), F.response([3], page: 2, total: 10, hasMore: false))
        try h.send("loadMore")
        await h.owner.runNext()
        XCTAssertEqual(h.vm.state.repositories.map(\.id), [1, 2, 3])
        XCTAssertEqual(h.fake.calls.count, 3)
        h.verifyDone()
    }

    func testTotalCountIsNullUntilASearchAnswersAndAfterAFirstPageFails() async throws {
        let h = SearchHarness()
        XCTAssertEqual(h.vm.snapshot["totalCount"], .null)
        try await h.show("swift", [1], total: 0, hasMore: false)
        XCTAssertEqual(h.vm.snapshot["totalCount"], 0)
        h.fake.stub(F.request("swift", .stars), .failure(.unavailable(message: "down")))
        let seq = try h.send("sort", "stars")
        _ = h.events.take()
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": [], "totalCount": nil,
                        "error": ["kind": "unavailable", "message": "down", "retryAfterSeconds": nil],
                        "errorMessage": "down",
                    ])
            ])
        h.verifyDone()
    }
}
