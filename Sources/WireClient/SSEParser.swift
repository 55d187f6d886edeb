/// An incremental parser of a `text/event-stream` body, following the WHATWG HTML
/// "event stream interpretation" rules.
///
/// Feed it the de-chunked body bytes in any slicing (byte by byte works); it calls back once per
/// dispatched event. Lines end in CRLF, LF or CR (a CRLF split across two feeds counts once);
/// `data:` lines are joined with LF; one space after the colon is removed; lines starting with
/// `:` are comments (counted); `retry:` with only ASCII digits sets `retry`; an `id` containing
/// NUL is ignored; a blank line dispatches, unless no data was seen; a leading UTF-8 BOM is
/// skipped; an unterminated last event is discarded at end of stream (it is never dispatched).
///
/// A value type owned by whoever feeds it (one thread at a time).
package struct SSEParser: Sendable {
    /// How many comment lines (`:` …) were seen, e.g. keep-alives.
    package private(set) var commentCount = 0
    /// The last valid `retry:` value in milliseconds, if any.
    package private(set) var retry: Int?
    /// The last event id buffer (persists across events, as in `EventSource.lastEventId`).
    package private(set) var lastEventID = ""

    private var line: [UInt8] = []
    private var lastWasCR = false
    private var atStreamStart = true
    private var data: [UInt8] = []
    private var hasData = false
    private var eventType: [UInt8] = []

    /// A parser at the start of a stream.
    package init() {}

    /// Consumes `bytes`, calling `emit` for every event completed by them.
    ///
    /// The load tool's path: copies each run of line bytes in one go up to the next CR or LF
    /// (a non-generic body, so no per-byte iterator calls through a generic witness).
    package mutating func feed(_ bytes: ArraySlice<UInt8>, emit: (SSEEvent) -> Void) {
        bytes.withUnsafeBufferPointer { buf in
            var i = 0
            let n = buf.count
            while i < n {
                let byte = buf[i]
                if lastWasCR {
                    lastWasCR = false
                    if byte == 0x0A {
                        i += 1
                        continue
                    }
                }
                if byte == 0x0D || byte == 0x0A {
                    lastWasCR = byte == 0x0D
                    processLine(emit: emit)
                    i += 1
                    continue
                }
                var j = i + 1
                while j < n && buf[j] != 0x0D && buf[j] != 0x0A { j += 1 }
                line.append(contentsOf: UnsafeBufferPointer(rebasing: buf[i..<j]))
                i = j
            }
        }
    }

    /// Consumes `bytes`, calling `emit` for every event completed by them.
    package mutating func feed<Bytes: Sequence>(_ bytes: Bytes, emit: (SSEEvent) -> Void) where Bytes.Element == UInt8 {
        for byte in bytes {
            if lastWasCR {
                lastWasCR = false
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0D:
                lastWasCR = true
                processLine(emit: emit)
            case 0x0A:
                processLine(emit: emit)
            default:
                line.append(byte)
            }
        }
    }

    /// Convenience: feeds `bytes` and returns the completed events.
    package mutating func feed<Bytes: Sequence>(_ bytes: Bytes) -> [SSEEvent] where Bytes.Element == UInt8 {
        var events: [SSEEvent] = []
        feed(bytes) { events.append($0) }
        return events
    }

    private mutating func processLine(emit: (SSEEvent) -> Void) {
        defer { line.removeAll(keepingCapacity: true) }
        if atStreamStart {
            atStreamStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        if line.isEmpty {
            dispatch(emit: emit)
            return
        }
        if line[0] == UInt8(ascii: ":") {
            commentCount += 1
            return
        }
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        let name = line[..<(colon ?? line.endIndex)]
        var valueStart = colon.map { $0 + 1 } ?? line.endIndex
        if valueStart < line.endIndex, line[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
        let value = line[valueStart...]
        if name.elementsEqual("data".utf8) {
            data.append(contentsOf: value)
            data.append(0x0A)
            hasData = true
        } else if name.elementsEqual("event".utf8) {
            eventType = Array(value)
        } else if name.elementsEqual("id".utf8) {
            if !value.contains(0) { lastEventID = String(decoding: value, as: UTF8.self) }
        } else if name.elementsEqual("retry".utf8) {
            if !value.isEmpty, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                retry = Int(String(decoding: value, as: UTF8.self))
            }
        }
    }

    private mutating func dispatch(emit: (SSEEvent) -> Void) {
        defer {
            data.removeAll(keepingCapacity: true)
            eventType.removeAll(keepingCapacity: true)
            hasData = false
        }
        guard hasData else { return }
        data.removeLast()  // the LF appended after the last data line
        let event = SSEEvent(
            id: lastEventID.isEmpty ? nil : lastEventID,
            event: eventType.isEmpty ? "message" : String(decoding: eventType, as: UTF8.self),
            data: String(decoding: data, as: UTF8.self)
        )
        emit(event)
    }
}
