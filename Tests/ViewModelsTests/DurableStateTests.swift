import Features
import Foundation
import GitHubSearch
import JSON
import ViewModels
import XCTest

/// Durable state: every view model's state survives encode → restore with an identical snapshot, a restored
/// loading search issues its request again (once, under its original `inputSeq`), and anything else is refused
/// with a precise error and no change.
final class DurableStateTests: XCTestCase {
    private typealias F = SearchFixtures

    /// The search state with the transient generation counter cleared (it is not stored).
    private func comparable(_ state: SearchState) -> SearchState {
        var s = state
        s.generation = 0
        return s
    }

    func testSearchStateWithResultsErrorAndRateLimitRoundTripsAndItsTimerResumes() async throws {
        let a = SearchHarness()
        try await a.show("swift", [1, 2], total: 10)
        a.fake.stub(
            F.request("swift", page: 2),
            .failure(.rateLimited(retryAfterSeconds: 30, message: "GitHub's search rate limit is exhausted.")))
        let more = try a.send("loadMore")
        await a.owner.runNext()
        _ = a.events.take()
        XCTAssertNotNil(a.vm.state.retryAt)

        let stored = a.vm.durableState
        XCTAssertEqual(stored["version"], 1)
        XCTAssertEqual(stored["effects"], ["rateLimitTimer": .int(more)], "the timer under way and its inputSeq")
        XCTAssertNil(stored["state"]?["generation"], "the generation counter is transient")
        XCTAssertEqual(stored["state"]?["error"]?["kind"], "rateLimited")
        XCTAssertNotNil(stored["state"]?["repositories"]?.arrayValue?.first?["avatarURL"], "stable field names")

        let b = SearchHarness()
        b.clock.advance(a.clock.now() - b.clock.now())
        try b.vm.restore(from: stored)
        XCTAssertEqual(b.vm.snapshot, a.vm.snapshot)
        XCTAssertEqual(comparable(b.vm.state), comparable(a.vm.state))
        XCTAssertEqual(b.vm.durableState, stored)
        XCTAssertEqual(b.events.take(), [], "a restore emits nothing; the session shows the snapshot")
        XCTAssertEqual(b.vm.runningEffects, 1, "the rate-limit timer was armed again")

        b.clock.advance(30)
        await b.owner.runNext()
        XCTAssertEqual(
            b.events.take(),
            [ViewModelEvent(inputSeq: more, outputs: ["searchEnabled": true, "loadMoreEnabled": true, "retryAt": nil])])
        XCTAssertEqual(b.fake.calls, [], "nothing was searched")
        a.vm.close()  // its cancelled timer may still post a (dropped) result, so only its stubs are checked
        XCTAssertEqual(a.fake.unusedStubs, [])
        b.verifyDone()
    }

    func testLoadingSearchRestoredIssuesItsRequestOnceUnderItsInputSeq() async throws {
        let a = SearchHarness()
        let gate = a.fake.stubGated(F.request("swift"))
        try a.send("query", "swift")
        let submit = try a.send("submit")
        XCTAssertTrue(a.vm.state.isLoading)
        let stored = a.vm.durableState
        XCTAssertEqual(stored["effects"], ["search": .int(submit)])
        a.vm.close()  // the old owner is gone; its request never answers
        _ = gate

        let b = SearchHarness()
        b.fake.stub(F.request("swift"), F.response([7, 8], total: 2, hasMore: false))
        try b.vm.restore(from: stored)
        XCTAssertEqual(b.vm.snapshot, a.vm.snapshot, "restored as loading")
        XCTAssertEqual(b.vm.runningEffects, 1, "exactly one request under way")
        await b.owner.runNext()
        let events = b.events.take()
        XCTAssertEqual(events.count, 1)
        XCTAssertEqual(events.first?.inputSeq, submit, "the answer is attributed to the input that asked")
        XCTAssertEqual(b.vm.state.repositories.map(\.id), [7, 8])
        XCTAssertFalse(b.vm.state.isLoading)
        XCTAssertEqual(b.fake.calls.count, 1)
        b.verifyDone()
    }

    func testRestoredRefreshRevalidatesAgain() async throws {
        let a = SearchHarness()
        try await a.show("swift", [1])
        _ = a.fake.stubGated(F.request("swift"), policy: .revalidate)
        let refresh = try a.send("refresh")
        let stored = a.vm.durableState
        a.vm.close()

        let b = SearchHarness()
        b.fake.stub(F.request("swift"), policy: .revalidate, F.response([1, 2]))
        try b.vm.restore(from: stored)
        await b.owner.runNext()
        XCTAssertEqual(b.events.take().map(\.inputSeq), [refresh])
        XCTAssertEqual(b.fake.calls.map(\.policy), [.revalidate], "a refresh stays a revalidation")
        b.verifyDone()
    }

    func testGarbageAndOtherVersionsAreRefusedPreciselyAndChangeNothing() async throws {
        let h = SearchHarness()
        try await h.show("swift", [1, 2])
        let before = (h.vm.snapshot, h.vm.durableState)
        var wrongType = h.vm.durableState.objectValue!
        wrongType["state"] = ["query": 5]
        var badEffects = h.vm.durableState.objectValue!
        badEffects["effects"] = ["search": "x"]
        let cases: [(JSONValue, DurableStateError)] = [
            ("garbage", .malformed(viewModel: "search", detail: "expected an object, got a string")),
            (["state": [:]], .malformed(viewModel: "search", detail: "'version' is missing or not an integer")),
            (
                ["version": 2, "state": before.1["state"]!],
                .unsupportedVersion(viewModel: "search", found: 2, supported: 1)
            ),
            (["version": 1], .malformed(viewModel: "search", detail: "'state' is missing")),
            (.object(wrongType), .malformed(viewModel: "search", detail: "state.query: expected String")),
            (
                .object(badEffects),
                .malformed(
                    viewModel: "search", detail: "effects.search: expected an integer inputSeq or null, got a string")
            ),
        ]
        for (input, expected) in cases {
            XCTAssertThrowsError(try h.vm.restore(from: input), "\(input)") { error in
                XCTAssertEqual(error as? DurableStateError, expected)
            }
            XCTAssertEqual(h.vm.snapshot, before.0)
            XCTAssertEqual(h.vm.durableState, before.1)
        }
        XCTAssertEqual(
            DurableStateError.unsupportedVersion(viewModel: "search", found: 2, supported: 1).detail,
            "durable state of 'search' has version 2; this build reads version 1")
        XCTAssertEqual(h.events.take(), [])
        XCTAssertEqual(h.vm.runningEffects, 0)
        h.verifyDone()
    }

    func testGreetingStateRoundTrips() throws {
        let a = GreetingViewModel()
        try a.send(input: "name", value: "ann", inputSeq: 1)
        try a.send(input: "greet", value: nil, inputSeq: 2)
        try a.send(input: "name", value: "bob", inputSeq: 3)
        let b = GreetingViewModel()
        try b.restore(from: a.durableState)
        XCTAssertEqual(b.state, a.state)
        XCTAssertEqual(b.snapshot, a.snapshot)
        XCTAssertEqual(
            a.durableState, ["version": 1, "state": ["name": "bob", "label": "Hello, ANN!"], "effects": [:]])
    }

    /// The greeting's hand-written stored form parses to what `JSONEncoder` writes, for names and labels
    /// that need escaping, and restores to the same state.
    func testGreetingHandWrittenStoredFormIsJSONEncodersValue() throws {
        let texts = ["", "ann", "quote \" back\\slash", "line\nfeed\ttab\u{01}", "ünïcødé 🙂", "</script>"]
        let feature = GreetingFeature()
        for name in texts {
            for label in [nil] + texts.map(Optional.some) {
                let state = GreetingFeature.State(name: name, label: label)
                let mine = try XCTUnwrap(feature.durableJSON(state))
                let foundation = try JSONEncoder().encode(state)
                XCTAssertEqual(
                    try JSONValue.parse(mine), try JSONValue.parse(foundation), "\(name) / \(label ?? "nil")")
                XCTAssertEqual(try JSONDecoder().decode(GreetingFeature.State.self, from: Data(mine)), state)
            }
        }
        let vm = GreetingViewModel()
        try vm.send(input: "name", value: "zoë", inputSeq: 1)
        try vm.send(input: "greet", value: nil, inputSeq: 2)
        XCTAssertEqual(
            try JSONValue.parse(vm.durableStateBytes),
            ["version": 1, "state": ["name": "zoë", "label": "Hello, ZOË!"], "effects": [:]])
    }

    func testStatusStateRoundTrips() throws {
        let a = StatusViewModel()
        a.update(
            UpstreamStatus(
                reachable: false, message: "GitHub cannot be reached.",
                rateLimit: RateLimit(limit: 30, remaining: 0, resetAt: 1_800_000_060, resource: "search")))
        let b = StatusViewModel()
        try b.restore(from: a.durableState)
        XCTAssertEqual(b.state, a.state)
        XCTAssertEqual(b.snapshot, a.snapshot)
        XCTAssertEqual(a.durableState["state"]?["rateLimit"]?["resource"], "search")
    }
}
