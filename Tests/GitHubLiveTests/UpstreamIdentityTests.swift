import XCTest

@testable import GitHubLive

/// The digest behind `UpstreamIdentity` against FIPS 180-4's vectors, and what the identity tells apart.
final class UpstreamIdentityTests: XCTestCase {
    func testSHA256MatchesTheStandardVectors() {
        XCTAssertEqual(SHA256.hex([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(
            SHA256.hex(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(
            SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")  // two blocks of padding
        XCTAssertEqual(
            SHA256.hex(Array(repeating: UInt8(ascii: "a"), count: 1_000_000)),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testTheIdentityTellsUpstreamsAndTokensApartAndNeverShowsTheToken() {
        let github = UpstreamIdentity(baseURL: "https://api.github.com", token: nil)
        XCTAssertEqual(github, UpstreamIdentity(baseURL: "https://api.github.com/", token: ""))
        XCTAssertEqual(github.key.count, 16)
        XCTAssertEqual(github.description, "https://api.github.com (token: no)")
        let token = "ghp_SECRET_0123456789abcdef"
        let keys = Set([
            github.key, UpstreamIdentity(baseURL: "http://127.0.0.1:9090", token: nil).key,
            UpstreamIdentity(baseURL: "https://api.github.com", token: token).key,
            UpstreamIdentity(baseURL: "https://api.github.com", token: token + "x").key,
        ])
        XCTAssertEqual(keys.count, 4)
        let withToken = UpstreamIdentity(baseURL: "https://u:pw@ghe.example/api/v3", token: token)
        XCTAssertEqual(withToken.description, "https://…@ghe.example/api/v3 (token: yes)")
        XCTAssertFalse(withToken.key.contains(token) || withToken.description.contains("pw"))
    }
}
