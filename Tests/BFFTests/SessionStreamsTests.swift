import XCTest

@testable import BFF

/// A session's list of streams (`InlineFirstList`) holds the first one inline and the others in an
/// array; it must behave like the array it replaced (order, count, removal).
final class SessionStreamsTests: XCTestCase {
    func testOrderCountAndRemovalAreThoseOfAnArray() {
        var list = InlineFirstList<String>()
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
        XCTAssertTrue(Array(list).isEmpty)
        for s in ["s0", "s1", "s2", "s3"] { list.append(s) }
        XCTAssertFalse(list.isEmpty)
        XCTAssertEqual(list.count, 4)
        XCTAssertEqual(Array(list), ["s0", "s1", "s2", "s3"])

        list.removeAll { $0 == "s2" }
        XCTAssertEqual(Array(list), ["s0", "s1", "s3"])
        list.removeAll { $0 == "s0" }
        XCTAssertEqual(Array(list), ["s1", "s3"], "the second becomes the first")
        XCTAssertEqual(list.count, 2)
        list.removeAll { _ in true }
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
        list.append("s3")
        XCTAssertEqual(Array(list), ["s3"])
    }
}
