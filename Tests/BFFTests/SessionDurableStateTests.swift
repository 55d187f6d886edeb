import Features
import Foundation
import JSON
import ViewModels
import WireClient
import XCTest

@testable import BFF

/// A session's view models stored as bytes and restored into another session, all or nothing.
final class SessionDurableStateTests: XCTestCase {
    private func restore(_ t: LiveApp, _ id: String, _ bytes: [UInt8]) throws -> DurableStateError? {
        try t.onOwner(of: id) { s -> DurableStateError? in
            do throws(DurableStateError) {
                try s.restore(from: bytes)
                return nil
            } catch {
                return error
            }
        }
    }

    func testViewModelsRestoreIntoAnotherSession() throws {
        let t = try LiveApp()
        let a = try t.createSession()
        _ = try t.post(a, "greeting", "name", #"{"value":"ann"}"#)
        _ = try t.post(a, "greeting", "greet")
        _ = try t.post(a, "search", "query", #"{"value":"swift"}"#)
        let bytes = try t.onOwner(of: a) { $0.storedForm() }
        let stored = try JSONValue.parse(bytes)
        XCTAssertEqual(stored["version"], 1)
        XCTAssertEqual(
            stored["viewModels"]?.objectValue?.keys, ["search", "greeting", "account"], "status is app-wide")

        let b = try t.createSession()
        let fresh = try t.state(b)  // publishes b's encoded snapshot: the restore must withdraw it
        XCTAssertNil(try restore(t, b, bytes))
        XCTAssertNotEqual(try t.state(b)["viewModels"], fresh["viewModels"])
        XCTAssertEqual(try t.state(b)["viewModels"], try t.state(a)["viewModels"])
        XCTAssertEqual(try JSONValue.parse(try t.onOwner(of: b) { $0.storedForm() }), stored)
        XCTAssertEqual(try t.state(b)["seq"], 0, "a restore emits no event")
    }

    func testRefusedStateChangesNothing() throws {
        let t = try LiveApp()
        let a = try t.createSession()
        _ = try t.post(a, "search", "query", #"{"value":"swift"}"#)
        var good = try JSONValue.parse(try t.onOwner(of: a) { $0.storedForm() }).objectValue!
        let b = try t.createSession()
        _ = try t.post(b, "greeting", "name", #"{"value":"bob"}"#)
        let before = try t.state(b)

        // search (first) restores, greeting (second) is refused: search is put back.
        var states = good["viewModels"]!.objectValue!
        states["greeting"] = ["version": 1, "state": ["name": 7]]
        good["viewModels"] = .object(states)
        XCTAssertEqual(
            try restore(t, b, JSONValue.object(good).bytes),
            .malformed(viewModel: "greeting", detail: "state.name: expected String"))
        XCTAssertEqual(try t.state(b), before)
        // Read on the owner too: GET /state could be answered from the snapshot published before the restore.
        XCTAssertEqual(try t.onOwner(of: b) { $0.snapshot }, before)

        XCTAssertEqual(
            try restore(t, b, Array("nope".utf8)),
            .malformed(viewModel: "session", detail: "not JSON: invalid literal at byte 0"))
        XCTAssertEqual(
            try restore(t, b, JSONValue.object(["version": 2, "viewModels": [:]]).bytes),
            .unsupportedVersion(viewModel: "session", found: 2, supported: 1))
        XCTAssertEqual(try t.state(b), before)
    }
}
