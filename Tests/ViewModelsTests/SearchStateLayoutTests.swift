import Features
import Foundation
import GitHubSearch
import ViewModels
import XCTest

/// The `search` state keeps its rarely set fields out of line (one box per session that searched,
/// none for a session that never did) without changing what it means or how it is stored.
final class SearchStateLayoutTests: XCTestCase {
    /// Every field set, `generation` too (it is not stored).
    static func everyField() -> SearchState {
        var s = SearchState(query: " swift ", sort: .stars)
        s.isLoading = true
        s.repositories = [SearchFixtures.repo(2)]
        s.totalCount = 42
        s.hasMore = true
        s.error = .upstream(message: "GitHub answered 502")
        s.stale = true
        s.current = SearchRequest(query: "swift", sort: .stars, page: 1, perPage: 30)
        s.loadedPage = 1
        s.retryAt = 1_800_000_000
        s.inFlight = SearchInFlight(
            request: SearchRequest(query: "swift", sort: .stars, page: 2, perPage: 30), policy: .revalidate)
        s.generation = 7
        return s
    }

    static func encoded(_ s: SearchState) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(s), as: UTF8.self)
    }

    /// The stored form is byte for byte the one the synthesized conformance wrote when every field was
    /// inline (both strings were printed by that code, keys sorted: `JSONEncoder` does not keep an
    /// order otherwise), and it reads back.
    func testStoredFormIsUnchanged() throws {
        let every = Self.everyField()
        XCTAssertEqual(
            try Self.encoded(every),
            #"{"current":{"order":"desc","page":1,"perPage":30,"query":"swift","sort":"stars"},"#
                + #""error":{"kind":"upstream","message":"GitHub answered 502"},"hasMore":true,"#
                + #""inFlight":{"policy":"revalidate","request":{"order":"desc","page":2,"perPage":30,"#
                + #""query":"swift","sort":"stars"}},"isLoading":true,"loadedPage":1,"query":" swift ","#
                + #""repositories":[{"avatarURL":"https:\/\/avatars.example\/2","description":"repo 2","#
                + #""forks":2,"fullName":"owner2\/repo2","htmlURL":"https:\/\/github.com\/owner2\/repo2","#
                + #""id":2,"language":"Swift","owner":"owner2","stars":20,"topics":["t2"],"#
                + #""updatedAt":"2026-01-03T00:00:00Z"}],"retryAt":1800000000,"sort":"stars","stale":true,"#
                + #""totalCount":42}"#)
        XCTAssertEqual(
            try Self.encoded(SearchState()),
            #"{"hasMore":false,"isLoading":false,"loadedPage":0,"query":"","repositories":[],"#
                + #""sort":"best-match","stale":false}"#)
        var back = try JSONDecoder().decode(SearchState.self, from: JSONEncoder().encode(every))
        XCTAssertEqual(back.generation, 0, "the generation is not stored")
        back.generation = every.generation
        XCTAssertEqual(back, every)
        XCTAssertEqual(
            try JSONDecoder().decode(SearchState.self, from: JSONEncoder().encode(SearchState())), SearchState())
    }

    /// The rarely set fields take no room inline, and a copy changed later does not change the original
    /// (the store keeps the old state while it diffs outputs).
    func testRareFieldsAreOutOfLineAndCopiedOnWrite() {
        XCTAssertLessThanOrEqual(MemoryLayout<SearchState>.size, 64, "error, current, retryAt, inFlight inline again?")
        let initial = SearchState()
        var a = initial
        a.error = .upstream(message: "x")
        XCTAssertNil(initial.error)
        XCTAssertNotEqual(a, initial)
        var b = a
        b.retryAt = 5
        b.error = nil
        XCTAssertEqual(a.error, .upstream(message: "x"), "a copy's change reached the original")
        XCTAssertNil(a.retryAt)
        XCTAssertEqual(b.retryAt, 5)
        b.retryAt = nil
        XCTAssertEqual(b, initial, "every rare field cleared is the initial state again")
        a.error = nil
        XCTAssertEqual(a, b)
        let every = Self.everyField()
        var c = every
        c.current?.page = 3
        c.inFlight = nil
        XCTAssertEqual(every.current?.page, 1)
        XCTAssertNotNil(every.inFlight)
        XCTAssertNotEqual(c, every)
    }
}
