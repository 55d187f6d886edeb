import EventHTTP
import JSON
import XCTest

@testable import BFF

/// The one mapping from a session's input outcomes to HTTP: every case's status, header and detail.
final class InputOutcomeTests: XCTestCase {
    private func problem(_ r: HTTPResponse) -> (Int, String?) {
        (r.status, (try? JSONValue.parse(r.body))?["detail"]?.stringValue)
    }

    func testEveryOutcomeMapsToItsStatusAndDetail() {
        let accepted = Application.response(to: .accepted(inputSeq: 3), sessionID: "s")
        XCTAssertEqual(accepted.status, 202)
        XCTAssertEqual(try JSONValue.parse(accepted.body), ["inputSeq": 3])
        let duplicate = Application.response(to: .duplicate(inputSeq: 3), sessionID: "s")
        XCTAssertEqual(duplicate.status, 202, "a repeated key answers as the first time")
        XCTAssertEqual(duplicate.body, accepted.body)
        for seq in [0, 7, 10, 12_345, Int.max] {  // written as bytes: the same as the JSON encoder's
            let r = Application.response(to: .accepted(inputSeq: seq), sessionID: "s")
            XCTAssertEqual(r.body, JSONValue.object(["inputSeq": .int(seq)]).bytes)
            XCTAssertEqual(r.header("Content-Type"), "application/json")
            XCTAssertEqual(r.headers.count, 1)
        }

        let limited = Application.response(to: .rateLimited(retryAfterSeconds: 2, inputsPerSecond: 50), sessionID: "s")
        XCTAssertTrue(problem(limited) == (429, "session 's' sent more than 50 inputs per second; retry in 2 s"))
        XCTAssertTrue(limited.headers.contains { $0.0 == "Retry-After" && $0.1 == "2" })

        let noVM = Application.response(
            to: .unknownViewModel(name: "x", known: ["search", "greeting", "status"]), sessionID: "s")
        XCTAssertTrue(problem(noVM) == (404, "no view model 'x'; known view models: search, greeting, status"))

        let noInput = Application.response(
            to: .refused(.unknownInput(viewModel: "status", input: "set", known: [])), sessionID: "s")
        XCTAssertTrue(problem(noInput) == (404, "view model 'status' has no input 'set'; it has no inputs"))

        let invalid = Application.response(
            to: .refused(
                .invalidValue(viewModel: "greeting", input: "name", detail: "expected a string, got a number")),
            sessionID: "s")
        XCTAssertTrue(
            problem(invalid) == (400, "invalid value for 'greeting/name': expected a string, got a number"))
    }
}
