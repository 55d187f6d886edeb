import XCTest

@testable import GitHubLive

/// The digest behind `UpstreamIdentity` (stable across versions), and what the identity tells apart.
final class UpstreamIdentityTests: XCTestCase {
    func testTheKeyIsTheSHA256DigestCachesWereWrittenUnder() {
        // Cache files and Redis entries are keyed by it: the digest must not change between versions.
        XCTAssertEqual(UpstreamIdentity(baseURL: "https://api.github.com", token: nil).key, "c792f4352ccb3028")
        XCTAssertEqual(UpstreamIdentity(baseURL: "http://127.0.0.1:9090/", token: "sim-token").key, "06442c16d5c845ec")
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
