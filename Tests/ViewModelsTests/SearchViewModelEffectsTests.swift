import Features
import GitHubSearch
import JSON
import ViewModels
import XCTest

/// The `search` view model's races, errors, staleness, selection and input validation.
final class SearchViewModelEffectsTests: XCTestCase {
    typealias F = SearchFixtures

    func testResponseToASupersededSearchArrivingLastIsIgnored() async throws {
        let h = SearchHarness()
        let gateA = h.fake.stubGated(F.request("swift"))
        let gateB = h.fake.stubGated(F.request("swift", .stars))
        try h.send("query", "swift")
        let a = try h.send("submit")
        XCTAssertEqual(
            h.events.take().last, ViewModelEvent(inputSeq: a, outputs: ["searchEnabled": false, "isLoading": true]))

        // A second submit while A loads is a no-op (submit is disabled); a sort change supersedes A.
        try h.send("submit")
        XCTAssertEqual(h.events.take(), [])
        let b = try h.send("sort", "stars")
        XCTAssertEqual(h.events.take(), [ViewModelEvent(inputSeq: b, outputs: ["sort": "stars"])])

        gateB.open(F.response([7, 8], total: 2, hasMore: false))
        // A was cancelled when B started: its task returned at once and its result is dropped, whichever
        // of the two reaches the owner first.
        await h.owner.runNext()
        await h.owner.runNext()
        XCTAssertTrue(gateA.wasCancelled)
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: b,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([7, 8]), "totalCount": 2,
                    ])
            ])

        gateA.open(F.response([1, 2, 3], total: 900, hasMore: true))  // too late: nobody waits for it
        XCTAssertEqual(h.owner.pendingCount, 0)
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "stars", searchEnabled: true, isLoading: false, repositories: [7, 8],
                totalCount: 2, hasMore: false, error: nil, stale: false))
        XCTAssertEqual(h.fake.calls.count, 2)
        h.verifyDone()
    }

    func testResponseToASupersededSearchArrivingFirstLeavesTheNewOneLoading() async throws {
        let h = SearchHarness()
        let gateA = h.fake.stubGated(F.request("swift"))
        let gateB = h.fake.stubGated(F.request("swift"), policy: .revalidate)
        try h.send("query", "swift")
        try h.send("submit")
        let b = try h.send("refresh")
        _ = h.events.take()

        gateA.open(.failure(.unavailable(message: "A failed")))
        await h.owner.runNext()
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: false, isLoading: true, repositories: [],
                totalCount: nil, hasMore: false, error: nil, stale: false))

        gateB.open(F.response([1], total: 1, hasMore: false))
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: b,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([1]), "totalCount": 1,
                    ])
            ])
        h.verifyDone()
    }

    /// (`rateLimited` has its own tests: it also sets `retryAt`.)
    func testEachSearchErrorBecomesTheErrorOutputAndClearsResults() async throws {
        let cases: [(SearchError, JSONValue)] = [
            (
                .invalidQuery(message: "The query is invalid."),
                ["kind": "invalidQuery", "message": "The query is invalid.", "retryAfterSeconds": nil]
            ),
            (
                .unavailable(message: "GitHub cannot be reached."),
                ["kind": "unavailable", "message": "GitHub cannot be reached.", "retryAfterSeconds": nil]
            ),
            (
                .upstream(message: "GitHub answered 502."),
                ["kind": "upstream", "message": "GitHub answered 502.", "retryAfterSeconds": nil]
            ),
        ]
        for (error, json) in cases {
            let h = SearchHarness()
            try await h.show("swift", [1, 2], total: 2, hasMore: true)
            h.fake.stub(F.request("swift", .updated), .failure(error))
            let seq = try h.send("sort", "updated")
            _ = h.events.take()
            await h.owner.runNext()
            XCTAssertEqual(
                h.events.take(),
                [
                    ViewModelEvent(
                        inputSeq: seq,
                        outputs: [
                            "searchEnabled": true, "isLoading": false, "repositories": [], "totalCount": nil,
                            "hasMore": false, "error": json, "errorMessage": json["message"] ?? nil,
                        ])
                ], "\(error)")
            XCTAssertEqual(
                h.vm.snapshot,
                F.snapshot(
                    query: "swift", sort: "updated", searchEnabled: true, isLoading: false, repositories: [],
                    totalCount: nil, hasMore: false, error: json, stale: false, loadMoreEnabled: false,
                    errorMessage: json["message"], retryAt: nil), "\(error)")

            // The next search clears the error as it starts.
            h.fake.stub(F.request("swift", .updated), F.response([3], total: 1, hasMore: false))
            let retry = try h.send("submit")
            XCTAssertEqual(
                h.events.take(),
                [
                    ViewModelEvent(
                        inputSeq: retry,
                        outputs: ["searchEnabled": false, "isLoading": true, "error": nil, "errorMessage": nil])
                ])
            await h.owner.runNext()
            XCTAssertEqual(
                h.vm.snapshot,
                F.snapshot(
                    query: "swift", sort: "updated", searchEnabled: true, isLoading: false, repositories: [3],
                    totalCount: 1, hasMore: false, error: nil, stale: false))
            h.verifyDone()
        }
    }

    func testFailedNextPageKeepsResultsSoLoadMoreCanRetry() async throws {
        let h = SearchHarness()
        try await h.show("swift", [1, 2], total: 10, hasMore: true)
        h.fake.stub(F.request("swift", page: 2), .failure(.unavailable(message: "down")))
        let seq = try h.send("loadMore")
        _ = h.events.take()
        await h.owner.runNext()
        let errorJSON: JSONValue = ["kind": "unavailable", "message": "down", "retryAfterSeconds": nil]
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "error": errorJSON, "loadMoreEnabled": true,
                        "errorMessage": "down",
                    ])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [1, 2],
                totalCount: 10, hasMore: true, error: errorJSON, stale: false))

        h.fake.stub(F.request("swift", page: 2), F.response([3], page: 2, total: 10, hasMore: false))
        try h.send("loadMore")
        await h.owner.runNext()
        XCTAssertEqual(h.vm.state.repositories.map(\.id), [1, 2, 3])
        XCTAssertEqual(h.vm.snapshot["error"], .null)
        h.verifyDone()
    }

    func testStaleFlagFollowsThePagesShown() async throws {
        let h = SearchHarness()
        h.fake.stub(F.request("swift"), F.response([1], total: 5, hasMore: true, stale: true))
        try h.send("query", "swift")
        let seq = try h.send("submit")
        _ = h.events.take()
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: seq,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([1]), "totalCount": 5,
                        "hasMore": true, "stale": true, "loadMoreEnabled": true,
                    ])
            ])

        // A fresh next page does not make the stale first page fresh.
        h.fake.stub(F.request("swift", page: 2), F.response([2], page: 2, total: 5, hasMore: false))
        try h.send("loadMore")
        await h.owner.runNext()
        XCTAssertEqual(h.vm.snapshot["stale"], true)

        // A fresh refresh does.
        h.fake.stub(F.request("swift"), policy: .revalidate, F.response([1], total: 5, hasMore: true))
        let refresh = try h.send("refresh")
        _ = h.events.take()
        await h.owner.runNext()
        XCTAssertEqual(
            h.events.take(),
            [
                ViewModelEvent(
                    inputSeq: refresh,
                    outputs: [
                        "searchEnabled": true, "isLoading": false, "repositories": F.reposJSON([1]), "hasMore": true,
                        "stale": false, "loadMoreEnabled": true,
                    ])
            ])
        XCTAssertEqual(
            h.vm.snapshot,
            F.snapshot(
                query: "swift", sort: "best-match", searchEnabled: true, isLoading: false, repositories: [1],
                totalCount: 5, hasMore: true, error: nil, stale: false))
        h.verifyDone()
    }

    func testSelectEmitsOpenURLAndDeselectSignals() async throws {
        let h = SearchHarness()
        try await h.show("swift", [1, 2, 3])
        let before = h.vm.snapshot

        let seq = try h.send("select", 2)
        XCTAssertEqual(
            h.events.take(),
            [ViewModelEvent(inputSeq: seq, signals: ["openURL": "https://github.com/owner2/repo2", "deselect": 2])])
        let again = try h.send("select", 3.0)  // an integral number is an integer
        XCTAssertEqual(
            h.events.take(),
            [ViewModelEvent(inputSeq: again, signals: ["openURL": "https://github.com/owner3/repo3", "deselect": 3])])

        // An id not in the list (a click that raced a new list) emits nothing and is not an error.
        try h.send("select", 99)
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.vm.snapshot, before)
        h.verifyDone()
    }

    func testInvalidInputsThrowPreciseErrorsAndChangeNothing() async throws {
        let h = SearchHarness()
        try await h.show("swift", [1])
        let before = h.vm.snapshot
        let sorts = "expected one of \"best-match\", \"stars\", \"forks\", \"updated\""
        let noValue = "takes no value (send an empty body or {}), got"
        let cases: [(String, JSONValue, InputError)] = [
            ("sort", "name", .invalidValue(viewModel: "search", input: "sort", detail: "\(sorts), got \"name\"")),
            ("sort", 1, .invalidValue(viewModel: "search", input: "sort", detail: "\(sorts), got a number")),
            ("query", 5, .invalidValue(viewModel: "search", input: "query", detail: "expected a string, got a number")),
            ("query", nil, .invalidValue(viewModel: "search", input: "query", detail: "expected a string, got null")),
            ("submit", "go", .invalidValue(viewModel: "search", input: "submit", detail: "\(noValue) a string")),
            ("loadMore", [1], .invalidValue(viewModel: "search", input: "loadMore", detail: "\(noValue) an array")),
            ("refresh", true, .invalidValue(viewModel: "search", input: "refresh", detail: "\(noValue) a boolean")),
            (
                "select", "1",
                .invalidValue(
                    viewModel: "search", input: "select", detail: "expected an integer repository id, got a string")
            ),
            (
                "select", 1.5,
                .invalidValue(
                    viewModel: "search", input: "select",
                    detail: "expected an integer repository id, got a non-integer number")
            ),
            (
                "open", nil,
                .unknownInput(
                    viewModel: "search", input: "open",
                    known: ["query", "sort", "submit", "loadMore", "refresh", "select"])
            ),
        ]
        for (input, value, expected) in cases {
            XCTAssertThrowsError(try h.vm.send(input: input, value: value, inputSeq: 100)) {
                XCTAssertEqual($0 as? InputError, expected)
            }
        }
        XCTAssertEqual(
            InputError.invalidValue(viewModel: "search", input: "sort", detail: "x").detail,
            "invalid value for 'search/sort': x")
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.vm.snapshot, before)
        XCTAssertEqual(h.fake.calls.count, 1)
        h.verifyDone()
    }

    func testResultArrivingAfterTheViewModelIsGoneIsDropped() async throws {
        let fake = FakeSearch()
        let owner = ManualExecutor()
        var vm: SearchViewModel<FakeSearch>? = SearchViewModel(search: fake, executor: owner.executor)
        let gate = fake.stubGated(F.request("swift"))
        try vm?.send(input: "query", value: "swift", inputSeq: 1)
        try vm?.send(input: "submit", value: nil, inputSeq: 2)
        weak let weakVM = vm
        vm = nil
        XCTAssertNil(weakVM, "an in-flight effect must not keep the view model alive")
        gate.open(F.response([1]))
        await owner.runNext()  // runs the hop; the view model is gone, so nothing happens
        XCTAssertEqual(owner.pendingCount, 0)
    }
}
