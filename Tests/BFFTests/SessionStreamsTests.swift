import EventHTTP
import Logging
import XCTest

@testable import BFF

/// A session's list of streams holds the first one inline and the others in an array; it must
/// behave like the array it replaced (order, count, removal).
final class SessionStreamsTests: XCTestCase {
    func testOrderCountAndRemovalAreThoseOfAnArray() {
        var c = AppConfiguration()
        c.http.threads = 1
        c.http.publicDirectory = nil
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let app = Application(configuration: c, search: UnexpectedSearch(), logger: logger)
        let loop = app.sessionLoops[0]
        let made = (0..<4).map { SessionStream(sessionID: "s\($0)", sessionHome: loop, host: loop) }

        var list = SessionStreams()
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
        XCTAssertTrue(Array(list).isEmpty)
        for s in made { list.append(s) }
        XCTAssertFalse(list.isEmpty)
        XCTAssertEqual(list.count, 4)
        XCTAssertEqual(list.map(\.sessionID), ["s0", "s1", "s2", "s3"])

        list.removeAll { $0 === made[2] }
        XCTAssertEqual(list.map(\.sessionID), ["s0", "s1", "s3"])
        list.removeAll { $0 === made[0] }
        XCTAssertEqual(list.map(\.sessionID), ["s1", "s3"], "the second becomes the first")
        XCTAssertEqual(list.count, 2)
        list.removeAll { _ in true }
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
        list.append(made[3])
        XCTAssertEqual(list.map(\.sessionID), ["s3"])
    }
}
