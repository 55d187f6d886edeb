import BFF
import Foundation
import JSON
import WireClient
import XCTest

/// An app-wide rate limit reaches every session's `search` on a live server: sessions that already exist
/// and sessions created during the block stop offering a search (`searchEnabled` false) and count down to
/// the same `retryAt`; when the app reports the block over, searching is offered again. (Found by QA:
/// a new session showed an enabled Search button under the banner saying the limit was exhausted.)
final class UpstreamBlockTests: XCTestCase {
    /// Reads events until the client's `search` outputs satisfy `done` (or the reader times out).
    private func read(
        _ reader: EventStreamReader, into client: inout ClientState, until done: (JSONObject) -> Bool
    ) throws {
        while !done(client.viewModels["search"]?.objectValue ?? [:]) {
            let event = try XCTUnwrap(try reader.next(timeout: 5), "no event: \(client.viewModels)")
            try client.apply(event)
        }
    }

    func testABlockReachesExistingAndNewSessionsAndItsEndReEnablesSearching() throws {
        let t = try LiveApp()
        let existing = try t.createSession()
        let (c1, r1) = try t.stream(existing)
        defer { c1.close() }
        var first = ClientState()
        try first.apply(try XCTUnwrap(r1.next()))
        XCTAssertEqual(try t.post(existing, "search", "query", #"{"value":"swift"}"#).status, 202)
        try read(r1, into: &first) { $0["searchEnabled"] == true }

        let until = Int(Date().timeIntervalSince1970) + 3600
        let hook = try WireConnection.post(
            port: t.port, path: "/api/_test/status",
            body: Array(#"{"reachable":true,"message":"rate limited","blockedUntil":\#(until)}"#.utf8))
        XCTAssertEqual(hook.status, 202)
        try read(r1, into: &first) { $0["searchEnabled"] == false }
        let retryAt = try XCTUnwrap(first.viewModels["search"]?["retryAt"]?.stringValue)
        XCTAssertTrue(retryAt.hasSuffix("Z"), retryAt)
        XCTAssertEqual(try t.state(existing)["viewModels"]?["search"]?["searchEnabled"], false)

        // A session created during the block starts blocked, and typing a query does not enable Search.
        let late = try t.createSession()
        let (c2, r2) = try t.stream(late)
        defer { c2.close() }
        var second = ClientState()
        try second.apply(try XCTUnwrap(r2.next()))
        XCTAssertEqual(try t.post(late, "search", "query", #"{"value":"haskell"}"#).status, 202)
        try read(r2, into: &second) { $0["query"] == "haskell" && $0["retryAt"]?.stringValue == retryAt }
        XCTAssertEqual(second.viewModels["search"]?["searchEnabled"], false)
        // Submitting while blocked is accepted (202) and changes nothing (no search starts).
        XCTAssertEqual(try t.post(late, "search", "submit").status, 202)
        XCTAssertEqual(try t.state(late)["viewModels"]?["search"]?["isLoading"], false)

        // The app reports the block over: both sessions offer searching again.
        let clear = try WireConnection.post(
            port: t.port, path: "/api/_test/status", body: Array(#"{"reachable":true,"message":null}"#.utf8))
        XCTAssertEqual(clear.status, 202)
        try read(r1, into: &first) { $0["searchEnabled"] == true }
        try read(r2, into: &second) { $0["searchEnabled"] == true }
        XCTAssertEqual(first.viewModels["search"]?["retryAt"], .null)
        XCTAssertEqual(try t.state(late)["viewModels"]?["search"]?["retryAt"], .null)
    }
}
