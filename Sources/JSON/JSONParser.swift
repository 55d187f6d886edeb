/// A JSON text that could not be parsed: the byte offset and what was expected there.
public struct JSONParseError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Byte offset into the input where parsing failed.
    public let offset: Int
    /// What was wrong at `offset`, e.g. "expected ',' or '}'".
    public let reason: String
    public var description: String { "\(reason) at byte \(offset)" }
}

extension JSONValue {
    /// The deepest nesting `parse` accepts, so hostile input cannot exhaust the stack.
    public static let maximumDepth = 64

    /// Parses one JSON value (RFC 8259, strict: no trailing commas, comments, NaN, or leading
    /// zeros; strings must be valid UTF-8; only whitespace may follow the value).
    public static func parse<Bytes: Collection>(_ bytes: Bytes) throws(JSONParseError) -> JSONValue
    where Bytes.Element == UInt8 {
        try parse(Array(bytes))
    }

    /// Parses one JSON value from bytes already in an array (request bodies: no generic code, no copy).
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }

    /// Parses a JSON string.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// The value of the document `{"name": value}` when `bytes` is exactly that: an object with one
    /// member whose key is written without escapes, valid JSON throughout. Anything else gives nil, an
    /// invalid document included: the caller then parses it whole (`parse`) to learn what it is or what is
    /// wrong. For reading one member without building an object (every input's body).
    public static func soleMember(_ name: StaticString, of bytes: [UInt8]) -> JSONValue? {
        var p = JSONParser(bytes: bytes)
        p.skipWhitespace()
        guard p.skip(UInt8(ascii: "{")) else { return nil }
        p.skipWhitespace()
        guard p.skip(UInt8(ascii: "\"")), p.i + name.utf8CodeUnitCount < bytes.count else { return nil }
        for k in 0..<name.utf8CodeUnitCount where bytes[p.i + k] != name.utf8Start[k] { return nil }
        p.i += name.utf8CodeUnitCount
        guard p.skip(UInt8(ascii: "\"")) else { return nil }
        p.skipWhitespace()
        guard p.skip(UInt8(ascii: ":")) else { return nil }
        p.skipWhitespace()
        p.depth = 1
        guard let value = try? p.parseValue() else { return nil }
        p.skipWhitespace()
        guard p.skip(UInt8(ascii: "}")) else { return nil }
        p.skipWhitespace()
        guard p.i == bytes.count else { return nil }  // (`value : nil` would be JSON's null: a literal)
        return value
    }
}

struct JSONParser {
    let bytes: [UInt8]
    var i = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let v = try parseValue()
        skipWhitespace()
        if i != bytes.count { throw fail("unexpected data after the JSON value") }
        return v
    }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: i, reason: reason) }

    /// Steps over `byte` if it is next.
    mutating func skip(_ byte: UInt8) -> Bool {
        guard i < bytes.count, bytes[i] == byte else { return false }
        i += 1
        return true
    }

    mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard i < bytes.count else { throw fail("unexpected end of input, expected a value") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character, expected a value")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw fail("invalid literal") }
        let p = word.utf8Start
        for k in 0..<n where bytes[i + k] != p[k] { throw fail("invalid literal") }
        i += n
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maximumDepth { throw fail("nesting deeper than \(JSONValue.maximumDepth)") }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        i += 1
        var obj = JSONObject()
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return .object(obj)
        }
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            skipWhitespace()
            obj[key] = try parseValue()
            skipWhitespace()
            guard i < bytes.count else { throw fail("unexpected end of input, expected ',' or '}'") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "}") {
                i += 1
                break
            }
            throw fail("expected ',' or '}'")
        }
        depth -= 1
        return .object(obj)
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        i += 1
        var arr: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return .array(arr)
        }
        while true {
            skipWhitespace()
            arr.append(try parseValue())
            skipWhitespace()
            guard i < bytes.count else { throw fail("unexpected end of input, expected ',' or ']'") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "]") {
                i += 1
                break
            }
            throw fail("expected ',' or ']'")
        }
        depth -= 1
        return .array(arr)
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, isDigit(bytes[i]) else { throw fail("expected a digit") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if i < bytes.count && isDigit(bytes[i]) { throw fail("leading zeros are not allowed") }
        } else {
            while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        }
        var isInteger = true
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < bytes.count, isDigit(bytes[i]) else { throw fail("expected a digit after '.'") }
            while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            isInteger = false
            i += 1
            if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw fail("expected a digit in the exponent") }
            while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if isInteger, let v = Int(text) { return .int(v) }
        guard let d = Double(text), d.isFinite else {
            i = start
            throw fail("number out of range")
        }
        return .double(d)
    }

    func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    mutating func parseString() throws(JSONParseError) -> String {
        i += 1  // opening quote
        var out: [UInt8] = []
        var runStart = i
        var escaped = false
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                if !escaped {  // the common case: the string straight from the input, no copy in between
                    let (start, end) = (runStart, i)
                    i += 1
                    let s = bytes.withUnsafeBufferPointer {
                        JSONParser.validatedString(UnsafeBufferPointer(rebasing: $0[start..<end]))
                    }
                    guard let s else { throw JSONParseError(offset: start, reason: "invalid UTF-8 in string") }
                    return s
                }
                out.append(contentsOf: bytes[runStart..<i])
                i += 1
                break
            }
            if c < 0x20 { throw fail("control character in string") }
            if c == UInt8(ascii: "\\") {
                escaped = true
                out.append(contentsOf: bytes[runStart..<i])
                i += 1
                guard i < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u")
                        else { throw fail("unpaired surrogate") }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("unpaired surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid unicode escape") }
                    out.append(contentsOf: String(Character(u)).utf8)
                default:
                    i -= 1
                    throw fail("invalid escape")
                }
                runStart = i
                continue
            }
            i += 1
        }
        guard let s = String(validating: out, as: UTF8.self) else {
            throw JSONParseError(offset: runStart, reason: "invalid UTF-8 in string")
        }
        return s
    }

    /// The string of `utf8` if it is valid UTF-8, else nil (`String(validating:as:)`). ASCII, the usual
    /// case in keys and inputs, takes `String(decoding:)`: `String(validating:as:)` is generic and looks up
    /// its metadata at run time for every string (docs/BENCHMARKS.md).
    static func validatedString(_ utf8: UnsafeBufferPointer<UInt8>) -> String? {
        var high: UInt8 = 0
        for b in utf8 { high |= b }
        if high < 0x80 { return String(decoding: utf8, as: UTF8.self) }
        return String(validating: utf8, as: UTF8.self)
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("truncated unicode escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw fail("invalid hex digit in unicode escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }
}
