import Features
import JSON
import ViewModels
import XCTest

/// `StoredFormMemo`: a view model's stored form (cluster mode's commit) encoded once and reused while the
/// state and the effects under way are unchanged; after any change, `durableState` and `snapshot` as they
/// are then (the durable text parses to `durableState`: `JSONEncoder` orders an object's members
/// differently from call to call, through `durableState` too).
final class StoredFormMemoTests: XCTestCase {
    private func assertCurrent(
        _ memo: StoredFormMemo, _ vm: some ViewModel, file: StaticString = #filePath, line: UInt = #line
    ) {
        memo.refresh(vm)
        XCTAssertEqual(try? JSONValue.parse(memo.durable), vm.durableState, "durable", file: file, line: line)
        XCTAssertEqual(memo.snapshot, JSONValue.object(vm.snapshot).bytes, "snapshot", file: file, line: line)
    }

    func testGreetingIsEncodedOnceWhileUnchanged() throws {
        let vm = GreetingViewModel()
        let memo = StoredFormMemo()
        assertCurrent(memo, vm)
        XCTAssertEqual(memo.encodings, 1)
        assertCurrent(memo, vm)
        XCTAssertEqual(memo.encodings, 1, "unchanged: the bytes are reused")
        try vm.send(input: "name", value: "ann", inputSeq: 1)
        assertCurrent(memo, vm)
        XCTAssertEqual(memo.encodings, 2)
        try vm.send(input: "greet", value: nil, inputSeq: 2)
        assertCurrent(memo, vm)
        XCTAssertEqual(memo.encodings, 3)
        try vm.send(input: "name", value: "ann", inputSeq: 3)  // the same name: no change
        assertCurrent(memo, vm)
        XCTAssertEqual(memo.encodings, 3)
    }

    /// A memo given another view model whose change count happens to be the same encodes that one.
    func testAnotherViewModelWithTheSameChangeCountIsEncodedAgain() throws {
        let a = GreetingViewModel()
        let b = GreetingViewModel()
        try a.send(input: "name", value: "ann", inputSeq: 1)
        try b.send(input: "name", value: "bob", inputSeq: 1)
        let memo = StoredFormMemo()
        assertCurrent(memo, a)
        assertCurrent(memo, b)
        XCTAssertEqual(memo.encodings, 2)
        XCTAssertTrue(String(decoding: memo.durable, as: UTF8.self).contains("bob"))
    }

    func testSearchFollowsItsStateAndTheEffectsUnderWay() async throws {
        let h = SearchHarness()
        let memo = StoredFormMemo()
        assertCurrent(memo, h.vm)
        try await h.show("swift", [1, 2], total: 10)
        assertCurrent(memo, h.vm)
        let encoded = memo.encodings
        assertCurrent(memo, h.vm)
        XCTAssertEqual(memo.encodings, encoded)
        // A page under way: the stored effects name it (and the state says it is loading).
        h.fake.stub(SearchFixtures.request("swift", page: 2), SearchFixtures.response([3], total: 10))
        try h.send("loadMore")
        assertCurrent(memo, h.vm)
        XCTAssertNotEqual(h.vm.durableState["effects"], [:])
        await h.owner.runNext()
        assertCurrent(memo, h.vm)
        XCTAssertEqual(h.vm.state.repositories.map(\.id), [1, 2, 3])
        // A restore replaces the state.
        let other = SearchHarness()
        try other.vm.restore(from: h.vm.durableState)
        let otherMemo = StoredFormMemo()
        assertCurrent(otherMemo, other.vm)
        try h.vm.restore(from: SearchHarness().vm.durableState)
        assertCurrent(memo, h.vm)
    }
}
