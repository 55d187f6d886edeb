import Primitives

/// An incremental decoder of HTTP/1.1 `Transfer-Encoding: chunked` bodies.
///
/// Feed it raw bytes in any slicing; it hands out the payload bytes and stops consuming right
/// after the terminating zero-size chunk and its trailer section, so that the caller can pass
/// the rest of the buffer to the next response. Chunk extensions and trailer fields are
/// skipped. Lines may end in CRLF or a bare LF (lenient, as most clients are).
///
/// A value type owned by whoever feeds it (one thread at a time).
package struct ChunkedDecoder: Sendable {
    private enum State: Sendable {
        case size(digits: Int)
        case extensionText
        case sizeLF
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailerLineStart
        case trailerLine
        case trailerFinalLF
        case done
    }

    private var state: State = .size(digits: 0)
    private var size = 0

    /// A decoder at the start of a chunked body.
    package init() {}

    /// True once the last chunk and the trailer section have been consumed.
    package var isDone: Bool { if case .done = state { return true } else { return false } }

    /// Consumes bytes from the front of `bytes`, calling `emit` with payload slices, and returns
    /// how many bytes it consumed (fewer than `bytes.count` only when the body ended).
    package mutating func feed(_ bytes: ArraySlice<UInt8>, emit: (ArraySlice<UInt8>) -> Void) throws(WireError) -> Int {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            switch state {
            case .done:
                return i - bytes.startIndex
            case .data(let remaining):
                let n = min(remaining, bytes.endIndex - i)
                emit(bytes[i..<(i + n)])
                i += n
                state = remaining == n ? .dataCR : .data(remaining: remaining - n)
                continue
            case .size(let digits):
                if let value = asciiHexValue(byte).map(Int.init) {
                    guard digits < 15 else { throw .malformed("chunk size too large") }
                    size = size * 16 + value
                    state = .size(digits: digits + 1)
                } else if digits == 0 {
                    throw .malformed("chunk size expected, got byte \(byte)")
                } else if byte == UInt8(ascii: ";") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                    state = .extensionText
                } else if byte == 0x0D {
                    state = .sizeLF
                } else if byte == 0x0A {
                    endOfSizeLine()
                } else {
                    throw .malformed("bad byte \(byte) in chunk size")
                }
            case .extensionText:
                if byte == 0x0D { state = .sizeLF } else if byte == 0x0A { endOfSizeLine() }
            case .sizeLF:
                guard byte == 0x0A else { throw .malformed("chunk size line not ended by LF") }
                endOfSizeLine()
            case .dataCR:
                if byte == 0x0D {
                    state = .dataLF
                } else if byte == 0x0A {
                    state = .size(digits: 0)
                } else {
                    throw .malformed("chunk data not followed by CRLF")
                }
            case .dataLF:
                guard byte == 0x0A else { throw .malformed("chunk data not followed by CRLF") }
                state = .size(digits: 0)
            case .trailerLineStart:
                if byte == 0x0D {
                    state = .trailerFinalLF
                } else if byte == 0x0A {
                    state = .done
                } else {
                    state = .trailerLine
                }
            case .trailerLine:
                if byte == 0x0A { state = .trailerLineStart }
            case .trailerFinalLF:
                guard byte == 0x0A else { throw .malformed("chunked trailer not ended by CRLF") }
                state = .done
            }
            i += 1
        }
        return i - bytes.startIndex
    }

    private mutating func endOfSizeLine() {
        state = size == 0 ? .trailerLineStart : .data(remaining: size)
        size = 0
    }
}
