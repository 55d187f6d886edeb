import BFF
import Foundation
import Glibc
import JSON
import WireClient
import XCTest

/// Memory per event stream: a server that opens and closes streams for days must not grow with
/// their number. Each test warms the server up, then churns a few thousand streams one after the
/// other (open, read the snapshot, close) and compares the process's heap in use before and after.
/// The streams that leaked cost about 290 bytes each, 430 with a session created
/// and deleted around each; these tests allow 64.
final class StreamChurnTests: XCTestCase {
    static let warmUp = 300
    static let churned = 2000
    static let allowedBytesPerStream = 64

    /// Bytes malloc has handed out and not taken back, over every arena: much less noisy than the
    /// resident set size, which moves by whole pages and keeps freed memory. glibc's `mallinfo2` is
    /// not in Swift's Glibc module (no <malloc.h>), so this reads the totals of `malloc_info`'s XML
    /// (found with dlsym): the arenas' memory minus their free chunks, plus mmapped chunks.
    private func heapInUse() throws -> Int {
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        let symbol = try XCTUnwrap(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_info"), "glibc's malloc_info")
        let mallocInfo = unsafeBitCast(symbol, to: MallocInfo.self)
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        let file = try XCTUnwrap(open_memstream(&buffer, &size))
        XCTAssertEqual(mallocInfo(0, file), 0)
        fclose(file)
        defer { free(buffer) }
        let xml = String(cString: try XCTUnwrap(buffer))
        // The process-wide totals follow the last arena's </heap>.
        let totals = xml.range(of: "</heap>", options: .backwards).map { String(xml[$0.upperBound...]) } ?? xml
        func total(_ tag: String) throws -> Int {
            let start = try XCTUnwrap(totals.range(of: tag), "\(tag) in malloc_info: \(totals)")
            let rest = totals[start.upperBound...]
            let size = try XCTUnwrap(rest.range(of: "size=\""))
            return try XCTUnwrap(Int(rest[size.upperBound...].prefix { $0.isNumber }))
        }
        return try total("<system type=\"current\"") - total("<total type=\"fast\"")
            - total("<total type=\"rest\"") + total("<total type=\"mmap\"")
    }

    /// Waits until the server has let go of every connection (and session, when `sessions` is 0):
    /// the client's close reaches the server asynchronously and has no reply to wait for.
    private func waitUntilQuiet(_ t: LiveApp, sessions: Int) throws {
        let deadline = MonotonicClock.now() + 10
        while t.app.server.openConnections > 0 || t.app.sessions > sessions {
            if MonotonicClock.now() > deadline {
                XCTFail(
                    "the server still has \(t.app.server.openConnections) connections and \(t.app.sessions) sessions")
                return
            }
            usleep(1000)
        }
    }

    /// Runs `warmUp` then `churned` iterations of `body` and returns the heap growth per iteration.
    private func growthPerStream(_ t: LiveApp, sessions: Int, _ body: () throws -> Void) throws -> Double {
        for _ in 0..<Self.warmUp { try body() }
        try waitUntilQuiet(t, sessions: sessions)
        let before = try heapInUse()
        for _ in 0..<Self.churned { try body() }
        try waitUntilQuiet(t, sessions: sessions)
        let after = try heapInUse()
        return Double(after - before) / Double(Self.churned)
    }

    func testStreamsOpenedAndClosedOnOneSessionLeaveNoMemoryBehind() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        let perStream = try growthPerStream(t, sessions: 1) {
            let (c, reader) = try t.stream(id)
            XCTAssertEqual(try reader.next()?.event, "snapshot")
            c.close()
        }
        print("stream churn on one session: \(perStream) bytes of heap per stream")
        XCTAssertLessThan(perStream, Double(Self.allowedBytesPerStream), "the heap grows with every stream")
    }

    func testStreamsEndedByDeletingTheirSessionLeaveNoMemoryBehind() throws {
        let t = try LiveApp()
        let perStream = try growthPerStream(t, sessions: 0) {
            let id = try t.createSession()
            let (c, reader) = try t.stream(id)
            XCTAssertEqual(try reader.next()?.event, "snapshot")
            let d = try WireConnection(port: t.port)
            XCTAssertEqual(try d.request("DELETE", "/api/sessions/\(id)").status, 204)
            d.close()
            XCTAssertEqual(try reader.next()?.event, "end")
            c.close()
        }
        print("stream churn with a session per stream: \(perStream) bytes of heap per stream")
        XCTAssertLessThan(perStream, Double(Self.allowedBytesPerStream), "the heap grows with every stream")
    }
}
