import EventHTTP
import Glibc
import JSON
import WireClient
import XCTest

@testable import BFF

/// The head of `GET /state` as the product sends it (written in one piece by `RawReply`): each
/// header once, in order, a current `Date`, the body's exact length; keep-alive and HEAD as before.
final class StateReplyTests: XCTestCase {
    func testStateHeadHasEachHeaderOnceAndTheBodysLength() throws {
        let t = try LiveApp { $0.http.threads = 1 }
        let id = try t.createSession()
        let c = try WireConnection(port: t.port)
        for _ in 0..<3 {  // one connection: kept alive
            let before = Int(time(nil))
            let r = try c.request("GET", "/api/sessions/\(id)/state")
            let after = Int(time(nil))
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.reason, "OK")
            XCTAssertEqual(
                r.headers.map { $0.0 },
                ["X-Content-Type-Options", "Content-Type", "Cache-Control", "Date", "Content-Length"])
            XCTAssertEqual(r.header("X-Content-Type-Options"), "nosniff")
            XCTAssertEqual(r.header("Content-Type"), "application/json")
            XCTAssertEqual(r.header("Cache-Control"), "no-store")
            XCTAssertEqual(r.header("Content-Length"), String(r.body.count))
            let date = try XCTUnwrap(r.header("Date"))
            let seconds = try XCTUnwrap(HTTPDate.parse(date), date)
            XCTAssertTrue((before...after).contains(seconds), "\(date) not within \(before)...\(after)")
            XCTAssertEqual(try JSONValue.parse(r.body)["seq"]?.intValue, 0)
        }
        let head = try c.request("HEAD", "/api/sessions/\(id)/state")
        XCTAssertEqual(head.status, 200)
        XCTAssertTrue(head.body.isEmpty)
        XCTAssertEqual(head.header("Content-Type"), "application/json")
        XCTAssertNotNil(head.header("Content-Length"))
        XCTAssertEqual(try c.request("GET", "/api/sessions/\(id)/state").status, 200, "still in step after HEAD")
        let metrics = try WireConnection.get(port: t.port, path: "/metrics").text
        let direct = metrics.split(separator: "\n").first { $0.hasPrefix("http_direct_replies_total ") }
        // the session's 201, four reads (HEAD goes through evhttp)
        XCTAssertEqual(direct, "http_direct_replies_total 5", metrics)
    }
}
