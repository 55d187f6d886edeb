import Features
import GitHubSearch
import JSON
import ViewModels
import XCTest

/// A `search` view model wired to a strict fake and a manual owner, plus its recorded events.
final class SearchHarness {
    let fake = FakeSearch()
    let owner = ManualExecutor()
    let clock = TestClock()
    let vm: SearchViewModel<FakeSearch>
    let events: EventRecorder
    let perPage: Int
    private var nextSeq = 1

    init(perPage: Int = 30) {
        self.perPage = perPage
        vm = SearchViewModel(search: fake, perPage: perPage, clock: clock, executor: owner.executor)
        events = EventRecorder(vm)
    }

    /// Sends an input with the next inputSeq and returns that number.
    @discardableResult
    func send(_ input: String, _ value: JSONValue = nil) throws -> Int {
        let seq = nextSeq
        try vm.send(input: input, value: value, inputSeq: seq)
        nextSeq += 1
        return seq
    }

    /// Types `query`, submits, and applies the stubbed `result`; asserts the events on the way.
    func show(
        _ query: String, _ ids: [Int], total: Int = 100, hasMore: Bool = true,
        file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        fake.stub(
            SearchFixtures.request(query, perPage: perPage),
            SearchFixtures.response(ids, total: total, hasMore: hasMore))
        try send("query", .string(query))
        let seq = try send("submit")
        await owner.runNext(file: file, line: line)
        let events = self.events.take()
        XCTAssertEqual(events.count, 3, file: file, line: line)
        XCTAssertEqual(events.last?.inputSeq, seq, file: file, line: line)
        XCTAssertEqual(vm.state.repositories.map(\.id), ids, file: file, line: line)
    }

    /// Asserts every stub was used and no result is left unapplied.
    func verifyDone(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(fake.unusedStubs, [], "stubs never called", file: file, line: line)
        XCTAssertEqual(owner.pendingCount, 0, "results never applied", file: file, line: line)
    }
}
