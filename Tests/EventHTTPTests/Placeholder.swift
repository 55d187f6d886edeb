import XCTest
final class EventHTTPTestsPlaceholder: XCTestCase { func testNothingYet() {} }
