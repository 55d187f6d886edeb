import XCTest
final class BFFTestsPlaceholder: XCTestCase { func testNothingYet() {} }
