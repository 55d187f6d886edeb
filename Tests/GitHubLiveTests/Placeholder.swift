import XCTest
final class GitHubLiveTestsPlaceholder: XCTestCase { func testNothingYet() {} }
