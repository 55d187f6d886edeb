import XCTest

@testable import JSON

/// `soleMember` reads `{"name": value}` without building an object, and says nil for everything
/// else: whenever it answers, it answers what the whole parse would.
final class SoleMemberTests: XCTestCase {
    func testTheUsualBodiesAreReadInPlace() throws {
        let cases: [(String, JSONValue)] = [
            (#"{"value":"abc"}"#, "abc"),
            (" {\n\t\"value\" : 12.5 } \r\n", 12.5),
            (#"{"value":null}"#, .null),
            (#"{"value":{"a":[1,true,"é\u00e9"]}}"#, ["a": [1, true, "éé"]]),
            (#"{"value":""}"#, ""),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(JSONValue.soleMember("value", of: Array(text.utf8)), expected, text)
            XCTAssertEqual(try JSONValue.parse(text)["value"], expected, text)
        }
    }

    func testAnythingElseIsLeftToTheWholeParse() {
        let others = [
            "", "{}", "[]", "\"value\"", #"{"value":1,"x":2}"#, #"{"x":1}"#, #"{"valu":1}"#, #"{"values":1}"#,
            #"{"val\u0075e":1}"#, #"{"value":1"#, #"{"value":}"#, #"{"value":01}"#, #"{"value":1}x"#,
            #"{"value":1,}"#, #"{"value" 1}"#, #"{"value":"\x"}"#, #"{"value":1}}"#, #"{"value":tru}"#,
            "{\"value\":\"\u{1}\"}",
            #"{"value""#, #"{"value"#, "{\"", "{",
        ]
        for text in others {
            XCTAssertNil(JSONValue.soleMember("value", of: Array(text.utf8)), text)
        }
        XCTAssertNil(JSONValue.soleMember("value", of: [0x7B, 0x22, 0x76, 0xFF]), "invalid UTF-8")
    }

    func testNestingIsLimitedAsInTheWholeParse() {
        func nested(_ depth: Int) -> [UInt8] {  // {"value": [[…]]} nested `depth` deep in all
            Array(
                ("{\"value\":" + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1)
                    + "}").utf8)
        }
        let limit = JSONValue.maximumDepth
        XCTAssertNotNil(JSONValue.soleMember("value", of: nested(limit)))
        XCTAssertNotNil(try? JSONValue.parse(nested(limit)))
        XCTAssertNil(JSONValue.soleMember("value", of: nested(limit + 1)))
        XCTAssertNil(try? JSONValue.parse(nested(limit + 1)))
    }
}
