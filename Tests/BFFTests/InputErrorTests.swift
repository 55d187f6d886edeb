import BFF
import EventHTTP
import JSON
import WireClient
import XCTest

/// Every bad input of the contract gets its status, a precise problem, and changes nothing.
final class InputErrorTests: XCTestCase {
    func testEveryBadInputIsRejectedPreciselyAndUsesNoInputSeq() throws {
        let t = try LiveApp(configure: { $0.http.maxBodyBytes = 1024 })
        let id = try t.createSession()
        let before = try t.state(id)

        XCTAssertTrue(try t.post(id, "greeting", "name", #"{"value":"#).problem(400).contains("malformed JSON body"))
        XCTAssertEqual(
            try t.post(id, "greeting", "name", #"{"value":42}"#).problem(400),
            "invalid value for 'greeting/name': expected a string, got a number")
        XCTAssertTrue(try t.post(id, "greeting", "name", "[1]").problem(400).contains("got an array"))
        XCTAssertTrue(try t.post(id, "greeting", "name", #"{"value":"x","extra":1}"#).problem(400).contains("'extra'"))
        XCTAssertTrue(try t.post(id, "search", "sort", #"{"value":"popularity"}"#).problem(400).contains("best-match"))
        XCTAssertTrue(try t.post(id, "greeting", "shout", "{}").problem(404).contains("no input 'shout'"))
        XCTAssertTrue(try t.post(id, "weather", "name", "{}").problem(404).contains("no view model 'weather'"))
        XCTAssertTrue(try t.post(id, "status", "reachable", "{}").problem(404).contains("status"))
        XCTAssertEqual(
            try t.post("nosuchsession", "greeting", "name", #"{"value":"x"}"#).problem(404),
            "no session 'nosuchsession'")
        let big = #"{"value":""# + String(repeating: "a", count: 2000) + #""}"#
        XCTAssertTrue(try t.post(id, "greeting", "name", big).problem(413).contains("limit is 1024 bytes"))
        let c = try WireConnection(port: t.port)
        let plain = try c.request(
            "POST", "/api/sessions/\(id)/greeting/name", headers: [("Content-Type", "text/plain")],
            body: Array("x".utf8))
        XCTAssertTrue(plain.problem(415).contains("text/plain"))
        let get = try WireConnection.get(port: t.port, path: "/api/sessions/\(id)/greeting/name")
        get.problem(405)
        XCTAssertEqual(get.header("Allow"), "POST")

        XCTAssertEqual(try t.state(id), before, "rejected inputs changed nothing")
        XCTAssertEqual(
            try t.post(id, "greeting", "name", #"{"value":"ok"}"#).json, ["inputSeq": 1], "no inputSeq was used up")
    }

    func testJSONMediaTypesAreMatchedByTheirTypeNotTheirSpelling() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        let c = try WireConnection(port: t.port)
        func post(_ type: String) throws -> WireResponse {
            try c.request(
                "POST", "/api/sessions/\(id)/greeting/name", headers: [("Content-Type", type)],
                body: Array(#"{"value":"x"}"#.utf8))
        }
        for accepted in [
            "application/json", "Application/JSON; charset=utf-8", " application/json ;x=1",
            "application/merge-patch+json", "APPLICATION/VND.API+JSON",
        ] {
            XCTAssertEqual(try post(accepted).status, 202, accepted)
        }
        for rejected in [
            "application/jsonx", "application/+json", "text/json", "application/json+xml", "json",
            "application/",
        ] {
            XCTAssertTrue(try post(rejected).problem(415).contains(rejected.trimmingHTTPWhitespace()), rejected)
        }
    }

    func testIdsOfTheRightShapeButNoSessionAre404() throws {
        let t = try LiveApp(configure: { $0.http.threads = 2 })
        let real = try t.createSession()
        let base = String(real.prefix(22))
        // loop 7 does not exist, a non-digit or signed loop index, no index, an index too long
        for id in [base + "7", base + "x", base + "-1", base, base + "0000"] {
            let r = try t.post(id, "greeting", "name", #"{"value":"x"}"#)
            XCTAssertEqual(r.status, 404, id)
        }
    }

    func testRateLimitAnswers429WithRetryAfter() throws {
        let t = try LiveApp(configure: {
            $0.inputRate = 1
            $0.inputBurst = 3
        })
        let id = try t.createSession()
        let c = try WireConnection(port: t.port)
        for i in 1...3 { XCTAssertEqual(try t.post(id, "greeting", "greet", on: c).json?["inputSeq"], .int(i)) }
        let limited = try t.post(id, "greeting", "greet", on: c)
        XCTAssertTrue(limited.problem(429).contains("more than 1 inputs per second"))
        XCTAssertEqual(limited.header("Retry-After"), "1")
    }

    func testIdempotencyKeyRepeatsTheFirstReplyWithoutApplyingAgain() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        let (_, reader) = try t.stream(id)
        XCTAssertEqual(try reader.next()?.event, "snapshot")
        let key = [("Idempotency-Key", "retry-1")]
        XCTAssertEqual(try t.post(id, "greeting", "name", #"{"value":"a"}"#, headers: key).json, ["inputSeq": 1])
        XCTAssertEqual(try t.post(id, "greeting", "name", #"{"value":""}"#, headers: key).json, ["inputSeq": 1])
        XCTAssertEqual(try t.post(id, "greeting", "name", #"{"value":""}"#).json, ["inputSeq": 2])
        let events = try reader.next(2)
        XCTAssertEqual(events.map { try? JSONValue.parse($0.data)["inputSeq"] }, [1, 2])
        XCTAssertEqual(try t.state(id)["viewModels"]?["greeting"]?["buttonEnabled"], false)
    }

    func testSessionAndStreamLimits() throws {
        let t = try LiveApp(configure: {
            $0.maxSessions = 2
            $0.maxStreamsPerSession = 2
        })
        let id = try t.createSession()
        _ = try t.createSession()
        let third = try WireConnection.post(port: t.port, path: "/api/sessions", body: [])
        XCTAssertTrue(third.problem(503).contains("maximum of 2 sessions"))
        XCTAssertNotNil(third.header("Retry-After"))
        let (_, a) = try t.stream(id)
        let (_, b) = try t.stream(id)
        XCTAssertEqual(try a.next()?.event, "snapshot")
        XCTAssertEqual(try b.next()?.event, "snapshot")
        let over = try WireConnection.get(port: t.port, path: "/api/sessions/\(id)/events")
        XCTAssertTrue(over.problem(429).contains("2 open event streams"))
        // deleting a session frees a slot
        XCTAssertEqual(try WireConnection(port: t.port).request("DELETE", "/api/sessions/\(id)").status, 204)
        XCTAssertEqual(try WireConnection.post(port: t.port, path: "/api/sessions", body: []).status, 201)
    }
}
