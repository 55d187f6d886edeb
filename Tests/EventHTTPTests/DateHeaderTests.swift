import Glibc
import WireClient
import XCTest

@testable import EventHTTP

/// The `Date` header the loop formats once per second (instead of evhttp, per response).
final class DateHeaderTests: XCTestCase {
    func testEveryResponseHasOneCurrentIMFFixdate() throws {
        let t = try TestServer()
        let before = Int(time(nil))
        let r = try WireConnection.get(port: t.port, path: "/hello")
        let after = Int(time(nil))
        XCTAssertEqual(r.status, 200)
        let dates = r.headers.filter { $0.0.lowercased() == "date" }.map { $0.1 }
        XCTAssertEqual(dates.count, 1, "exactly one Date header: \(r.headers)")
        let value = try XCTUnwrap(dates.first)
        XCTAssertEqual(value.count, 29, value)
        XCTAssertTrue(value.hasSuffix(" GMT"), value)
        let seconds = try XCTUnwrap(HTTPDate.parse(value), value)
        XCTAssertTrue((before...after).contains(seconds), "\(value) not within \(before)...\(after)")
        XCTAssertEqual(HTTPDate.format(seconds), value)
    }

    /// The cache itself: formatted for its second, reused within it, refreshed when the second changes
    /// (the live test above cannot tell: evhttp adds a Date of its own to a response that has none).
    func testTheCacheFollowsTheSecond() {
        var cache = DateHeaderCache()
        func value(_ now: time_t) -> String { cache.withCurrent(now: now) { String(cString: $0) } }
        XCTAssertEqual(value(1_800_000_000), HTTPDate.format(1_800_000_000))
        XCTAssertEqual(value(1_800_000_000), "Fri, 15 Jan 2027 08:00:00 GMT")
        XCTAssertEqual(value(1_800_000_001), "Fri, 15 Jan 2027 08:00:01 GMT")
        XCTAssertEqual(value(1_800_003_600), HTTPDate.format(1_800_003_600))
    }
}
