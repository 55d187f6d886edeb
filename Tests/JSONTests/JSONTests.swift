import XCTest

@testable import JSON

final class JSONTests: XCTestCase {
    func testRoundTripPreservesOrderAndValues() throws {
        let text = #"{"b":1,"a":[true,false,null,-12,1.5,"x"],"c":{"d":"e"}}"#
        let v = try JSONValue.parse(text)
        XCTAssertEqual(v.text, text)
        XCTAssertEqual(v["a"]?.arrayValue?.count, 6)
        XCTAssertEqual(v["c"]?["d"], "e")
    }

    func testEscapesControlCharactersLineSeparatorsAndQuotes() {
        let v: JSONValue = .string("a\"b\\c\nd\re\u{01}f\u{2028}g\u{2029}h<é>")
        XCTAssertEqual(v.text, #""a\"b\\c\nd\re\u0001f\u2028g\u2029h<é>""#)
        XCTAssertFalse(v.bytes.contains(0x0A))
        XCTAssertFalse(v.bytes.contains(0x0D))
        XCTAssertEqual(try JSONValue.parse(v.bytes), v)
    }

    func testIntegersAndDoubles() throws {
        XCTAssertEqual(try JSONValue.parse("0"), .int(0))
        XCTAssertEqual(try JSONValue.parse("-9223372036854775808"), .int(Int.min))
        XCTAssertEqual(try JSONValue.parse("1e2"), .double(100))
        XCTAssertEqual(JSONValue.int(Int.min).text, "-9223372036854775808")
        XCTAssertEqual(JSONValue.double(.nan).text, "null")
        XCTAssertEqual(JSONValue.double(2.0).text, "2")
        XCTAssertEqual(JSONValue.double(2.0).intValue, 2)
        XCTAssertNil(JSONValue.double(2.5).intValue)
    }

    func testUnicodeEscapesAndSurrogatePairs() throws {
        XCTAssertEqual(try JSONValue.parse(#""\u00e9\ud83d\ude00""#), .string("é😀"))
        XCTAssertThrowsError(try JSONValue.parse(#""\ud83d""#))
        XCTAssertThrowsError(try JSONValue.parse(#""\ude00""#))
    }

    func testRejectsMalformedInputWithPosition() {
        let cases: [(String, Int)] = [
            ("", 0), ("{", 1), ("{\"a\":1,}", 7), ("[1,]", 3), ("01", 1), ("tru", 0), ("\"abc", 4),
            ("{\"a\" 1}", 5), ("1 2", 2), ("\"a\u{01}\"", 2), ("NaN", 0), ("[1] x", 4),
        ]
        for (text, offset) in cases {
            XCTAssertThrowsError(try JSONValue.parse(text), text) { error in
                XCTAssertEqual((error as? JSONParseError)?.offset, offset, "offset for \(text)")
            }
        }
    }

    func testRejectsInvalidUTF8AndDeepNesting() {
        XCTAssertThrowsError(try JSONValue.parse([0x22, 0xFF, 0x22]))
        // Invalid sequences of every kind, in a string with and without an escape (two paths): a lone
        // continuation byte, a truncated 2-, 3- and 4-byte sequence (the last as long as its U+FFFD), an
        // overlong form, a surrogate, past U+10FFFF.
        let invalid: [[UInt8]] = [
            [0x80], [0xC3], [0xE2, 0x82], [0xF0, 0x90, 0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
            [0xF4, 0x90, 0x80, 0x80],
        ]
        for bytes in invalid {
            XCTAssertThrowsError(try JSONValue.parse([0x22, 0x61] + bytes + [0x22]), "\(bytes)")
            XCTAssertThrowsError(try JSONValue.parse([0x22, 0x5C, 0x6E] + bytes + [0x22]), "\(bytes) after an escape")
        }
        // Valid ones of every length, ASCII or not, escaped or not.
        for text in ["abc", "é", "€ 1", "𝄞", #"a\u00e9"#, #"\u20ac€"#, #"\ud834\udd1e"#] {
            let value = try? JSONValue.parse("\"" + text + "\"")
            XCTAssertNotNil(value, text)
        }
        XCTAssertEqual(try? JSONValue.parse(Array("\"é€𝄞\"".utf8)), "é€𝄞")
        XCTAssertThrowsError(
            try JSONValue.parse(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)))
        XCTAssertNoThrow(try JSONValue.parse(String(repeating: "[", count: 60) + String(repeating: "]", count: 60)))
    }

    func testObjectEqualityIgnoresOrderAndSetterKeepsPosition() {
        var a: JSONObject = ["x": 1, "y": 2]
        let b: JSONObject = ["y": 2, "x": 1]
        XCTAssertEqual(a, b)
        a["x"] = 3
        XCTAssertEqual(a.keys, ["x", "y"])
        a["x"] = nil
        XCTAssertEqual(a.keys, ["y"])
        a.merge(["z": "w", "y": 5])
        XCTAssertEqual(JSONValue.object(a).text, #"{"y":5,"z":"w"}"#)
    }
}
