import Features
import GitHubSearch
import JSON
import ViewModels
import XCTest

/// Every output after every input of the `search` view model: typing, submitting, paging, refreshing.
final class SearchViewModelTests: XCTestCase {
    typealias F = SearchFixtures

    func testContractNamesAndInitialSnapshot() {
        let h = SearchHarness()
        XCTAssertEqual(h.vm.name, "search")
        XCTAssertEqual(h.vm.inputNames, ["query", "sort", "submit", "loadMore", "refresh", "select"])
        XCTAssertEqual(
            h.vm.snapshot.keys,
            [
                "query", "sort", "searchEnabled", "isLoading", "repositories", "totalCount", "hasMore", "error",
                "stale",
                "loadMoreEnabled", "errorMessage", "retryAt",
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "", sort: "best-match", searchEnabled: false, isLoading: false, repositories: [],
                totalCount: nil,
                hasMore: false, error: nil, stale: false, loadMoreEnabled: false, errorMessage: nil, retryAt: nil))
    }

    func testQueryInputSetsQueryAndSearchEnabled() throws {
        let h = SearchHarness()
        try h.send("query", "swift")
        XCTAssertEqual(
            h.events.take(), [ViewModelEvent(inputSeq: 1, outputs: ["query": "swift", "searchEnabled": true])])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [],
                totalCount: nil, hasMore: false, error: nil, stale: false))

        try h.send("query", " \t ")
        XCTAssertEqual(
            h.events.take(), [ViewModelEvent(inputSeq: 2, outputs: ["query": " \t ", "searchEnabled": false])])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: " \t ", sort: "best-match", searchEnabled: false, isLoading: false, repositories: [],
                totalCount: nil, hasMore: false, error: nil, stale: false))

        try h.send("query", " \t ")  // unchanged: no event
        XCTAssertEqual(h.events.take(), [])

        try h.send("submit")  // blank query: no-op
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.fake.calls, [])
        h.verifyDone()
    }

    func testSubmitEmitsLoadingThenResults() async throws {
        let h = SearchHarness()
        h.fake.stub(F.request("swift"), F.response([1, 2, 3], total: 1234, hasMore: true))
        try h.send("query", "  swift ")
        XCTAssertEqual(
            h.events.take(), [ViewModelEvent(inputSeq: 1, outputs: ["query": "  swift ", "searchEnabled": true])])

        try h.send("submit")
        XCTAssertEqual(
            h.events.take(), [ViewModelEvent(inputSeq: 2, outputs: ["searchEnabled": false, "isLoading": true])])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "  swift ", sort: "best-match", searchEnabled: false, isLoading: true, repositories: [],
                totalCount: nil, hasMore: false, error: nil, stale: false))

        // Typing while loading: its own event; submit stays disabled and is a no-op.
        try h.send("query", "swiftui")
        XCTAssertEqual(h.events.take(), [ViewModelEvent(inputSeq: 3, outputs: ["query": "swiftui"])])
        try h.send("submit")
        XCTAssertEqual(h.events.take(), [])

        await h.owner.runNext()
        // The result carries the inputSeq of the submit that started it (2), not the latest input.
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: 2,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([1, 2, 3]),
                        "totalCount": 1234, "hasMore": true, "loadMoreEnabled": true,
                    ])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swiftui", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [1, 2, 3],
                totalCount: 1234, hasMore: true, error: nil, stale: false))
        XCTAssertEqual(h.fake.calls, [.init(request: F.request("swift"), policy: .useCache)])
        h.verifyDone()
    }

    func testLoadMoreAppendsNextPageWithoutDuplicates() async throws {
        let h = SearchHarness()
        try await h.show("swift", [1, 2, 3], total: 100, hasMore: true)
        h.fake.stub(F.request("swift", page: 2), F.response([3, 4, 5], page: 2, total: 100, hasMore: false))

        let seq = try h.send("loadMore")
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq, outputs: ["searchEnabled": false, "isLoading": true, "loadMoreEnabled": false])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: false, isLoading: true, repositories: [1, 2, 3],
                totalCount: 100, hasMore: true, error: nil, stale: false))

        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([1, 2, 3, 4, 5]),
                        "hasMore": false,
                    ])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: true, isLoading: false,
                repositories: [1, 2, 3, 4, 5], totalCount: 100, hasMore: false, error: nil, stale: false))

        // No more pages: loadMore is a no-op (no event, no call).
        try h.send("loadMore")
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.fake.calls.count, 2)
        h.verifyDone()
    }

    func testLoadMoreIsNoOpBeforeAnySearchAndWhileLoading() async throws {
        let h = SearchHarness()
        try h.send("loadMore")
        XCTAssertEqual(h.events.take(), [])

        try await h.show("swift", [1, 2], hasMore: true)
        let gate = h.fake.stubGated(F.request("swift"), policy: .revalidate)
        let seq = try h.send("refresh")
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq, outputs: ["searchEnabled": false, "isLoading": true, "loadMoreEnabled": false])
            ])
        try h.send("loadMore")  // loading: no-op
        XCTAssertEqual(h.events.take(), [])

        gate.open(F.response([1, 2], hasMore: true))
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq, outputs: ["searchEnabled": true, "isLoading": false, "loadMoreEnabled": true])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [1, 2],
                totalCount: 100, hasMore: true, error: nil, stale: false))
        XCTAssertEqual(
            h.fake.calls,
            [
                .init(request: F.request("swift"), policy: .useCache),
                .init(request: F.request("swift"), policy: .revalidate),
            ])
        h.verifyDone()
    }

    func testRefreshRevalidatesTheSearchShownFromPageOne() async throws {
        let h = SearchHarness()
        try h.send("refresh")  // nothing shown yet: no-op
        XCTAssertEqual(h.events.take(), [])

        try await h.show("swift", [1, 2], hasMore: true)
        h.fake.stub(F.request("swift", page: 2), F.response([3, 4], page: 2, hasMore: true))
        try h.send("loadMore")
        await h.owner.runNext()
        _ = h.events.take()

        // Editing the text does not change what refresh re-runs.
        let edit = try h.send("query", "rust")
        XCTAssertEqual(h.events.take(), [ViewModelEvent(inputSeq: edit, outputs: ["query": "rust"])])

        h.fake.stub(F.request("swift"), policy: .revalidate, F.response([1, 2, 9], total: 101, hasMore: true))
        let seq = try h.send("refresh")
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq, outputs: ["searchEnabled": false, "isLoading": true, "loadMoreEnabled": false])
            ])
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([1, 2, 9]),
                        "totalCount": 101, "loadMoreEnabled": true,
                    ])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "rust", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [1, 2, 9],
                totalCount: 101, hasMore: true, error: nil, stale: false))

        // Paging restarts after a refresh: the next loadMore asks for page 2 again.
        h.fake.stub(F.request("swift", page: 2), F.response([3], page: 2, total: 101, hasMore: false))
        try h.send("loadMore")
        await h.owner.runNext()
        XCTAssertEqual(h.vm.state.repositories.map(\.id), [1, 2, 9, 3])
        XCTAssertEqual(
            h.fake.calls.map(\.policy), [.useCache, .useCache, .revalidate, .useCache])
        XCTAssertEqual(h.fake.calls.map(\.request.page), [1, 2, 1, 2])
        h.verifyDone()
    }

    func testSortChangeReRunsTheSearchShown() async throws {
        let h = SearchHarness()
        // Before any search: only the sort output changes.
        try h.send("sort", "stars")
        XCTAssertEqual(h.events.take(), [ViewModelEvent(inputSeq: 1, outputs: ["sort": "stars"])])
        try h.send("sort", "stars")  // unchanged: no event, no search
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.fake.calls, [])

        h.fake.stub(F.request("swift", .stars), F.response([5, 4], total: 2, hasMore: false))
        try h.send("query", "swift")
        try h.send("submit")
        await h.owner.runNext()
        _ = h.events.take()

        h.fake.stub(F.request("swift", .forks), F.response([4, 5], total: 2, hasMore: false))
        let seq = try h.send("sort", "forks")
        XCTAssertEqual(
            h.events.take(),
            [ViewModelEvent(inputSeq: seq, outputs: ["sort": "forks", "searchEnabled": false, "isLoading": true])])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "forks", searchEnabled: false, isLoading: true, repositories: [5, 4],
                totalCount: 2, hasMore: false, error: nil, stale: false))
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq,
                    outputs: ["searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([4, 5])])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "forks", searchEnabled: true, isLoading: false, repositories: [4, 5],
                totalCount: 2, hasMore: false, error: nil, stale: false))
        XCTAssertEqual(h.fake.calls.map(\.request.sort), [.stars, .forks])
        h.verifyDone()
    }

    func testPageSizeIsConfigurableAndClamped() async throws {
        let h = SearchHarness(perPage: 10)
        try await h.show("swift", [1])
        XCTAssertEqual(h.fake.calls.map(\.request.perPage), [10])
        h.verifyDone()

        let big = SearchHarness(perPage: 500)
        big.fake.stub(F.request("swift", perPage: 100), F.response([1]))
        try big.send("query", "swift")
        try big.send("submit")
        await big.owner.runNext()
        XCTAssertEqual(big.fake.calls.map(\.request.perPage), [100])
        big.verifyDone()
    }

    func testNoPageIsRequestedPastTheResultCap() async throws {
        let h = SearchHarness(perPage: 100)
        h.fake.stub(F.request("swift", perPage: 100), F.response([1], total: 50_000, hasMore: true))
        try h.send("query", "swift")
        try h.send("submit")
        await h.owner.runNext()
        for page in 2...10 {
            // GitHub's page says "more", but page 11 would lie past the 1000-result cap.
            h.fake.stub(
                F.request("swift", page: page, perPage: 100),
                F.response([page], page: page, total: 50_000, hasMore: true))
            try h.send("loadMore")
            await h.owner.runNext()
        }
        XCTAssertEqual(h.vm.snapshot["hasMore"], false)
        XCTAssertEqual(h.vm.state.repositories.map(\.id), Array(1...10))
        _ = h.events.take()
        try h.send("loadMore")
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.fake.calls.count, 10)
        h.verifyDone()
    }
}
