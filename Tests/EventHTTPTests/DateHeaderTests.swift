import EventHTTP
import Glibc
import WireClient
import XCTest

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
}
