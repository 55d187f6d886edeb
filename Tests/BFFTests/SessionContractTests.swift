import BFF
import JSON
import WireClient
import XCTest

/// The contract's happy paths for sessions, inputs, the stream and the snapshot.
final class SessionContractTests: XCTestCase {
    func testCreateStreamInputAndStateFollowTheContract() throws {
        let t = try LiveApp()
        let created = try WireConnection.post(port: t.port, path: "/api/sessions", body: [])
        XCTAssertEqual(created.status, 201)
        let body = try XCTUnwrap(created.json)
        let id = try XCTUnwrap(body["id"]?.stringValue)
        XCTAssertGreaterThanOrEqual(id.count, 22)
        XCTAssertTrue(id.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        XCTAssertEqual(created.header("Location"), "/api/sessions/\(id)")
        XCTAssertEqual(body["events"]?.stringValue, "/api/sessions/\(id)/events")
        XCTAssertEqual(body["state"]?.stringValue, "/api/sessions/\(id)/state")
        XCTAssertEqual(body["expiresInSeconds"], 1800)

        let (_, reader) = try t.stream(id)
        let first = try XCTUnwrap(reader.next())
        XCTAssertEqual(reader.retry, 2000)
        XCTAssertEqual(first.event, "snapshot")
        XCTAssertEqual(first.id, "0")
        XCTAssertEqual(try JSONValue.parse(first.data), try t.state(id))
        let greeting = try JSONValue.parse(first.data)["viewModels"]?["greeting"]
        XCTAssertEqual(greeting, ["buttonEnabled": false, "label": nil])

        let r1 = try t.post(id, "greeting", "name", #"{"value":"swift"}"#)
        XCTAssertEqual(r1.status, 202)
        XCTAssertEqual(r1.json, ["inputSeq": 1])
        let r2 = try t.post(id, "greeting", "greet")  // no body at all
        XCTAssertEqual(r2.json, ["inputSeq": 2])
        let r3 = try t.post(id, "greeting", "greet", "{}")
        XCTAssertEqual(r3.json, ["inputSeq": 3])  // accepted; no change, so no event

        let e1 = try XCTUnwrap(reader.next())
        XCTAssertEqual(e1.id, "1")
        XCTAssertEqual(e1.event, "greeting")
        XCTAssertEqual(try JSONValue.parse(e1.data), ["inputSeq": 1, "outputs": ["buttonEnabled": true]])
        let e2 = try XCTUnwrap(reader.next())
        XCTAssertEqual(e2.id, "2")
        XCTAssertEqual(try JSONValue.parse(e2.data), ["inputSeq": 2, "outputs": ["label": "Hello, SWIFT!"]])

        let state = try t.state(id)
        XCTAssertEqual(state["seq"], 2)
        XCTAssertEqual(state["viewModels"]?["greeting"], ["buttonEnabled": true, "label": "Hello, SWIFT!"])
        XCTAssertEqual(state["viewModels"]?["status"]?["reachable"], true)
        XCTAssertEqual(state["viewModels"]?["search"]?["searchEnabled"], false)
    }

    func testDeleteEndsStreamsAndForgetsTheSession() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        let (c, reader) = try t.stream(id)
        XCTAssertEqual(try reader.next()?.event, "snapshot")
        let d = try WireConnection(port: t.port).request("DELETE", "/api/sessions/\(id)")
        XCTAssertEqual(d.status, 204)
        let end = try XCTUnwrap(reader.next())
        XCTAssertEqual(end.event, "end")
        XCTAssertEqual(try JSONValue.parse(end.data), ["reason": "deleted"])
        XCTAssertNil(try reader.next())  // the response ends
        _ = c
        XCTAssertEqual(
            try WireConnection.get(port: t.port, path: "/api/sessions/\(id)/state").problem(404), "no session '\(id)'")
        try WireConnection(port: t.port).request("DELETE", "/api/sessions/\(id)").problem(404)
        try WireConnection.get(port: t.port, path: "/api/sessions/\(id)/events").problem(404)
    }

    func testTwoStreamsSeeTheSameEventsAndAppliedEventsEqualState() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        let (_, a) = try t.stream(id)
        let (_, b) = try t.stream(id)
        var stateA = ClientState()
        var stateB = ClientState()
        try stateA.apply(XCTUnwrap(a.next()))
        try stateB.apply(XCTUnwrap(b.next()))
        for (i, name) in ["a", "", "bob", "", "carol"].enumerated() {
            XCTAssertEqual(try t.post(id, "greeting", "name", #"{"value":"\#(name)"}"#).json?["inputSeq"], .int(i + 1))
        }
        _ = try t.post(id, "greeting", "greet")
        let eventsA = try a.next(6)
        let eventsB = try b.next(6)
        XCTAssertEqual(eventsA, eventsB)
        XCTAssertEqual(eventsA.compactMap(\.id), ["1", "2", "3", "4", "5", "6"])
        for e in eventsA { try stateA.apply(e) }
        for e in eventsB { try stateB.apply(e) }
        XCTAssertEqual(stateA.snapshot, try t.state(id))
        XCTAssertEqual(stateB.snapshot, try t.state(id))
        XCTAssertEqual(stateA.viewModels["greeting"]?["label"], "Hello, CAROL!")
    }

    func testSharedStatusFansOutToEverySessionOnEveryLoop() throws {
        let t = try LiveApp()
        var readers: [EventStreamReader] = []
        var ids: [String] = []
        for _ in 0..<6 {  // sessions and streams spread over both loops
            let id = try t.createSession()
            let (_, r) = try t.stream(id)
            XCTAssertEqual(try r.next()?.event, "snapshot")
            readers.append(r)
            ids.append(id)
        }
        let hook = try WireConnection.post(
            port: t.port, path: "/api/_test/status",
            body: Array(#"{"reachable":false,"message":"GitHub is down"}"#.utf8))
        XCTAssertEqual(hook.status, 202)
        for r in readers {
            let e = try XCTUnwrap(r.next())
            XCTAssertEqual(e.event, "status")
            XCTAssertEqual(
                try JSONValue.parse(e.data),
                ["inputSeq": nil, "outputs": ["reachable": false, "message": "GitHub is down"]])
        }
        for id in ids { XCTAssertEqual(try t.state(id)["viewModels"]?["status"]?["message"], "GitHub is down") }
    }

    func testOperationsEndpoints() throws {
        let t = try LiveApp()
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/healthz").status, 200)
        XCTAssertEqual(try WireConnection.get(port: t.port, path: "/readyz").json, ["status": "ready"])
        _ = try t.createSession()
        let m = try WireConnection.get(port: t.port, path: "/metrics")
        XCTAssertEqual(m.status, 200)
        XCTAssertTrue(m.header("Content-Type")?.hasPrefix("text/plain") ?? false)
        let text = m.text
        for needle in [
            "# TYPE http_requests_total counter",
            #"http_requests_total{route="/api/sessions",method="POST",status="201"} 1"#,
            "# TYPE http_request_duration_seconds histogram", "http_open_connections", "bff_sessions 1",
            "process_resident_memory_bytes",
        ] {
            XCTAssertTrue(text.contains(needle), "metrics lack \(needle)")
        }
        // every sample line is `name{labels} value` or `name value`
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            XCTAssertNotNil(Double(line.split(separator: " ").last ?? ""), "bad sample line: \(line)")
        }
    }
}
