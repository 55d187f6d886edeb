import EventHTTP
import GitHubLive
import GitHubSearch
import Logging
import XCTest

/// A redirect must not carry the bearer token anywhere: the gateway refuses to follow it.
final class RedirectTests: XCTestCase {
    func testRedirectIsNotFollowedSoTheTokenNeverTravels() async throws {
        var quiet = Logger(label: "redirect")
        quiet.logLevel = .critical
        var config = HTTPServer.Configuration()
        config.port = 0
        config.threads = 1
        let received = Recorder<String>()
        let elsewhere = HTTPServer(configuration: config, logger: quiet)
        elsewhere.router.add(.GET, "/collect") { request, responder in
            received.append(request.header("Authorization") ?? "(none)")
            responder.send(.json(200, ["total_count": 0, "incomplete_results": false, "items": []]))
        }
        try elsewhere.start()
        defer { elsewhere.shutdown(gracePeriod: 1) }
        let origin = HTTPServer(configuration: config, logger: quiet)
        let target = "http://127.0.0.1:\(elsewhere.port)/collect"
        origin.router.add(.GET, "/search/repositories") { _, responder in
            responder.send(HTTPResponse(status: 302, headers: [("Location", target)]))
        }
        try origin.start()
        defer { origin.shutdown(gracePeriod: 1) }

        let gateway = try GitHubGateway(
            configuration: .init(
                baseURL: "http://127.0.0.1:\(origin.port)", token: "ghp_REDIRECTsecret", requestTimeout: 5),
            logger: quiet)
        var caught: SearchError?
        do { _ = try await gateway.search(SearchRequest(query: "swift")) } catch { caught = error }
        // swift-corelibs reports a refused redirect either as the 3xx itself (upstream) or as a
        // transport error (unavailable), depending on timing; either way the search fails and the
        // token stays home.
        XCTAssertNotNil(caught, "a redirect must not produce results")
        XCTAssertTrue(["upstream", "unavailable"].contains(caught?.kind ?? ""), "\(String(describing: caught))")
        XCTAssertEqual(received.all, [], "the redirect was followed")
    }
}
