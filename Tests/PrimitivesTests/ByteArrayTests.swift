import Primitives
import XCTest

/// `bytesWritten` gives the bytes its closure wrote, and only those, on both of its paths (small
/// arrays written on the stack, large ones in place).
final class ByteArrayTests: XCTestCase {
    func testTheBytesWrittenAndOnlyThoseOnBothPaths() {
        for count in [0, 1, 40, 1024, 1025, 70_000] {
            let full = bytesWritten(count: count) { buffer in
                for i in 0..<count { buffer[i] = UInt8(truncatingIfNeeded: i &* 7) }
                return count
            }
            XCTAssertEqual(full, (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }, "count \(count)")
            let half = bytesWritten(count: count) { buffer in
                for i in 0..<count / 2 { buffer[i] = 0xAB }
                return count / 2
            }
            XCTAssertEqual(half, [UInt8](repeating: 0xAB, count: count / 2), "half of \(count)")
        }
    }
}
