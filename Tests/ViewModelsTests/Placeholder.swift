import XCTest
final class ViewModelsTestsPlaceholder: XCTestCase { func testNothingYet() {} }
