import JSON
import XCTest

@testable import LoadKit

/// The search scenario's classification of what a user got, from the stream's events alone.
final class SearchOutcomeTests: XCTestCase {
    private func event(_ seq: Int, _ outputs: String) -> String { "{\"inputSeq\":\(seq),\"outputs\":\(outputs)}" }

    func testLoadingThenResultsIsFreshTheFirstTimeAndCachedAfter() {
        var view = SearchStreamState()
        XCTAssertFalse(view.apply(eventData: event(2, "{\"isLoading\":true,\"searchEnabled\":false,\"error\":null}")))
        XCTAssertTrue(view.apply(eventData: event(2, "{\"isLoading\":false,\"repositories\":[],\"hasMore\":true}")))
        XCTAssertEqual(view.outcome(keySeenBefore: false), .fresh)
        XCTAssertEqual(view.outcome(keySeenBefore: true), .cached)
        XCTAssertTrue(view.hasMore)
    }

    func testStaleIsRememberedAcrossEventsThatDoNotRepeatIt() {
        var view = SearchStreamState()
        view.apply(eventData: event(1, "{\"isLoading\":true}"))
        view.apply(eventData: event(1, "{\"isLoading\":false,\"repositories\":[],\"stale\":true}"))
        XCTAssertEqual(view.outcome(keySeenBefore: true), .stale)
        // The next search is stale too: `stale` did not change, so the event does not carry it.
        view.apply(eventData: event(2, "{\"isLoading\":true}"))
        XCTAssertTrue(view.apply(eventData: event(2, "{\"isLoading\":false,\"repositories\":[]}")))
        XCTAssertEqual(view.outcome(keySeenBefore: false), .stale)
        view.apply(eventData: event(3, "{\"isLoading\":true}"))
        view.apply(eventData: event(3, "{\"isLoading\":false,\"stale\":false}"))
        XCTAssertEqual(view.outcome(keySeenBefore: false), .fresh)
    }

    func testRateLimitedAndOtherErrorsAreToldApartAndClearedByTheNextSearch() {
        var view = SearchStreamState()
        view.apply(eventData: event(1, "{\"isLoading\":true}"))
        let limited = "{\"kind\":\"rateLimited\",\"message\":\"m\",\"retryAfterSeconds\":30}"
        XCTAssertTrue(view.apply(eventData: event(1, "{\"isLoading\":false,\"error\":\(limited)}")))
        XCTAssertEqual(view.outcome(keySeenBefore: true), .rateLimited, "an error wins over a key seen before")
        view.apply(eventData: event(2, "{\"isLoading\":true,\"error\":null}"))
        let upstream = "{\"kind\":\"upstream\",\"message\":\"m\",\"retryAfterSeconds\":null}"
        view.apply(eventData: event(2, "{\"isLoading\":false,\"error\":\(upstream)}"))
        XCTAssertEqual(view.outcome(keySeenBefore: false), .failed)
        view.apply(eventData: event(3, "{\"isLoading\":true,\"error\":null}"))
        view.apply(eventData: event(3, "{\"isLoading\":false,\"repositories\":[]}"))
        XCTAssertEqual(view.outcome(keySeenBefore: false), .fresh)
    }

    func testRetryAtMarksTheSessionRateLimitedUntilTheViewModelClearsIt() {
        var view = SearchStreamState()
        XCTAssertFalse(view.isRateLimited)
        view.apply(eventData: event(1, "{\"isLoading\":true}"))
        let limited = "{\"kind\":\"rateLimited\",\"message\":\"m\",\"retryAfterSeconds\":30}"
        view.apply(
            eventData: event(
                1,
                "{\"isLoading\":false,\"error\":\(limited),\"retryAt\":\"2026-11-23T19:00:00Z\",\"searchEnabled\":false}"
            ))
        XCTAssertTrue(view.isRateLimited, "the scenario then counts an attempt as rate limited without posting")
        // An event that does not mention retryAt leaves it as it was.
        view.apply(eventData: event(2, "{\"query\":\"swift\"}"))
        XCTAssertTrue(view.isRateLimited)
        // The view model's own timer clears it (an event with no inputSeq).
        view.apply(eventData: "{\"inputSeq\":null,\"outputs\":{\"retryAt\":null,\"searchEnabled\":true}}")
        XCTAssertFalse(view.isRateLimited)
    }

    func testAnErrorOrResultsWithoutIsLoadingEndASearchOnlyWhenNotLoading() {
        var view = SearchStreamState()
        XCTAssertTrue(view.apply(eventData: event(1, "{\"repositories\":[]}")), "coalesced: loading never seen")
        view.apply(eventData: event(2, "{\"isLoading\":true}"))
        XCTAssertFalse(view.apply(eventData: event(2, "{\"totalCount\":3}")))
        XCTAssertFalse(view.apply(eventData: "not json"))
    }

    func testSnapshotSeedsTheState() throws {
        var view = SearchStreamState()
        let snapshot = try JSONValue.parse("{\"isLoading\":false,\"stale\":true,\"error\":null,\"hasMore\":false}")
        view.apply(outputs: try XCTUnwrap(snapshot.objectValue))
        XCTAssertTrue(view.stale)
        XCTAssertNil(view.errorKind)
    }

    func testCountsSuccessRateAndRatioCountOnlySearchesThatShowedResults() {
        var counts = SearchOutcomeCounts()
        XCTAssertEqual(counts.successRate, 1)
        for (outcome, n) in [(SearchOutcome.fresh, 3), (.cached, 90), (.stale, 4), (.rateLimited, 2), (.failed, 1)] {
            for _ in 0..<n { counts.record(outcome) }
        }
        XCTAssertEqual(counts.total, 100)
        XCTAssertEqual(counts.showedResults, 97)
        XCTAssertEqual(counts.successRate, 0.97, accuracy: 1e-12)
        XCTAssertEqual(counts.showedResultsPerUpstreamRequest(10), 9.7, accuracy: 1e-12)
        XCTAssertEqual(counts.showedResultsPerUpstreamRequest(0), 0)
    }

    func testLongTailAndVariants() {
        XCTAssertEqual(QueryMix.term(rank: 0), "swift")
        XCTAssertEqual(QueryMix.term(rank: 50), "swift react")
        let pairs = Set((50..<QueryMix.maximumTerms).map(QueryMix.term(rank:)))
        XCTAssertEqual(pairs.count, QueryMix.maximumTerms - 50, "every tail rank is a different pair")
        XCTAssertFalse(
            pairs.contains { $0.split(separator: " ").count != 2 || Set($0.split(separator: " ")).count != 2 })
        XCTAssertEqual(QueryMix.variant(of: "swift", kind: 0), "Swift")
        XCTAssertEqual(QueryMix.variant(of: "swift", kind: 1), "SWIFT")
        XCTAssertEqual(QueryMix.variant(of: "swift", kind: 2), " swift ")
        XCTAssertEqual(QueryMix.variant(of: "swift nio", kind: 3), "swift  nio")
        let canonical = Set((0..<500).map(QueryMix.term(rank:)))
        var typed = QueryMix(seed: 3, terms: 500, variants: 1)
        for _ in 0..<200 {
            let query = typed.nextQuery()
            XCTAssertFalse(canonical.contains(query), "always a variant: '\(query)'")
            let folded = SearchScenario.canonical(query)
            XCTAssertTrue(canonical.contains(folded), "of a canonical query: '\(query)'")
        }
        var plain = QueryMix(seed: 3, terms: 500)
        for _ in 0..<200 { XCTAssertTrue(canonical.contains(plain.nextQuery())) }
    }
}
