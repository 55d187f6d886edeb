import XCTest

@testable import GitHubLive

final class PercentEncodingTests: XCTestCase {
    /// What goes into GitHub's `q=`: RFC 3986's unreserved characters as they are, every other byte of
    /// the UTF-8 (space, `+`, `:`, `&`, `=`, `/`, `"`, `é`) as `%XX` with upper-case hex.
    func testOnlyUnreservedCharactersPassAndEveryOtherUTF8ByteIsEncoded() {
        XCTAssertEqual(
            GitHubGateway.percentEncode(#"swift language:Go+é &x=1/"a b"~-._"#),
            "swift%20language%3AGo%2B%C3%A9%20%26x%3D1%2F%22a%20b%22~-._")
        XCTAssertEqual(GitHubGateway.percentEncode("AZaz09"), "AZaz09")
        XCTAssertEqual(GitHubGateway.percentEncode(""), "")
    }
}
