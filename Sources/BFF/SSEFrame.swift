import JSON

/// Server-Sent Events framing (WHATWG HTML §9.2): `id:`, `event:` and one `data:` line per line
/// of payload, then a blank line. Payload line breaks of any kind (CRLF, CR, LF) become separate
/// `data:` lines, so no stray CR ever reaches the wire; names and ids are single-line by construction.
enum SSEFrame {
    /// The stream preamble: the client's reconnection delay.
    static func retry(milliseconds: Int) -> [UInt8] { Array("retry: \(milliseconds)\n\n".utf8) }

    /// A keep-alive comment.
    static let keepAlive: [UInt8] = Array(": keep-alive\n\n".utf8)

    /// One event whose data is a JSON text (compact JSON never contains a raw line break).
    static func event(id: Int?, name: String, json: JSONValue) -> [UInt8] {
        var data: [UInt8] = []
        json.write(into: &data)
        return event(id: id, name: name, data: data)
    }

    /// One event whose data is already-encoded compact JSON (one line, no CR or LF).
    static func event(id: Int?, name: String, data: [UInt8]) -> [UInt8] {
        event(id: id, name: name, capacity: data.count) { $0.append(contentsOf: data) }
    }

    /// One event whose compact JSON data `writeData` appends to the frame itself: the frame is the only
    /// buffer (a session's own events, the per-input path). `capacity`: the data's expected size.
    static func event(id: Int?, name: String, capacity: Int, writeData: (inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(capacity + name.utf8.count + 48)  // "id: " + 20 digits + "\nevent: \ndata: " + "\n\n": 41
        if let id {
            out.append(contentsOf: "id: ".utf8)
            JSONValue.writeInt(id, into: &out)
            out.append(0x0A)
        }
        out.append(contentsOf: "event: ".utf8)
        if name.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            for b in name.utf8 where b != 0x0A && b != 0x0D { out.append(b) }
        } else {
            out.append(contentsOf: name.utf8)
        }
        out.append(contentsOf: "\ndata: ".utf8)
        writeData(&out)
        out.append(0x0A)
        out.append(0x0A)
        return out
    }

    /// One event with arbitrary text data, split into `data:` lines at any line break.
    static func event(id: Int?, name: String, text: String) -> [UInt8] {
        var out = Array((id.map { "id: \($0)\n" } ?? "").utf8)
        out.append(contentsOf: "event: \(name)\n".utf8)
        var line: [UInt8] = []
        var previousCR = false
        func flush() {
            out.append(contentsOf: "data: ".utf8)
            out.append(contentsOf: line)
            out.append(0x0A)
            line.removeAll()
        }
        for b in text.utf8 {
            if b == 0x0A && previousCR {
                previousCR = false
                continue
            }
            previousCR = b == 0x0D
            if b == 0x0A || b == 0x0D { flush() } else { line.append(b) }
        }
        flush()
        out.append(0x0A)
        return out
    }
}

extension SSEFrame {
    /// The parts of one frame as `event(id:name:data:)` makes it (`id: N`, `event: NAME`, one
    /// `data:` line, a blank line), read back without copying: how a multiplexed stream re-frames a
    /// session's events. Anything else (a comment, `retry:`, several data lines) is not read.
    struct Parts {
        let id: Int?
        let name: ArraySlice<UInt8>
        let data: ArraySlice<UInt8>

        var isSnapshot: Bool { name.elementsEqual("snapshot".utf8) }

        /// The first frame of `rest`, which loses it; nil (and `rest` untouched) when `rest` does not
        /// start with a whole frame.
        init?(_ rest: inout ArraySlice<UInt8>) {
            var cursor = rest
            func line(after prefix: String) -> ArraySlice<UInt8>? {
                guard cursor.starts(with: prefix.utf8), let nl = cursor.firstIndex(of: 0x0A) else { return nil }
                let value = cursor[(cursor.startIndex + prefix.utf8.count)..<nl]
                cursor = cursor[(nl + 1)...]
                return value
            }
            var id: Int?
            if let digits = line(after: "id: ") {
                guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                    return nil
                }
                id = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            }
            guard let name = line(after: "event: "), let data = line(after: "data: "), cursor.first == 0x0A else {
                return nil
            }
            cursor = cursor.dropFirst()
            self.id = id
            self.name = name
            self.data = data
            rest = cursor
        }
    }
}
