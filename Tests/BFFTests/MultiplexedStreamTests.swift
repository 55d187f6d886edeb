import BFF
import JSON
import WireClient
import XCTest

/// `GET /api/events?sessions=…`: several sessions on one connection, each with the rules of its own
/// stream (snapshot or replay first, order, end, limits), on real sockets.
final class MultiplexedStreamTests: XCTestCase {
    /// A client of a multiplexed stream: each session's state, applied as its own stream's would be.
    struct Clients {
        var sessions: [String: ClientState] = [:]
        /// Every (session, event id) applied, to find repeats.
        var seen: [String] = []
        var ended: [String: String] = [:]

        mutating func apply(_ e: SSEEvent) throws {
            let data = try JSONValue.parse(e.data)
            let session = try XCTUnwrap(data["session"]?.stringValue, "every event names its session: \(e.data)")
            if e.event == "end" {
                ended[session] = data["reason"]?.stringValue
                return
            }
            // Cluster mode's `status` events have no seq (the status is not a session event there).
            if e.event == "status", data["seq"] == nil {
                var vm = sessions[session, default: ClientState()].viewModels["status"]?.objectValue ?? [:]
                vm.merge(data["outputs"]?.objectValue ?? [:])
                sessions[session, default: ClientState()].viewModels["status"] = .object(vm)
                return
            }
            let seq = try XCTUnwrap(data["seq"]?.intValue, "every event carries its session's seq")
            seen.append("\(session)#\(seq)")
            // As the session's own stream would have framed it.
            var own = data.objectValue ?? [:]
            own["session"] = nil
            if e.event != "snapshot" { own["seq"] = nil }
            try sessions[session, default: ClientState()].apply(
                SSEEvent(
                    id: String(seq), event: e.event, data: String(decoding: JSONValue.object(own).bytes, as: UTF8.self))
            )
        }
    }

    func path(_ items: [String]) -> String { "/api/events?sessions=" + items.joined(separator: ",") }

    func testEachSessionGetsItsSnapshotThenItsEventsInOrderWithThePositionAsID() throws {
        let t = try LiveApp()
        let (a, b) = (try t.createSession(), try t.createSession())
        _ = try t.post(b, "greeting", "name", #"{"value":"bee"}"#)
        let c = try WireConnection(port: t.port, timeout: 10)
        let (head, reader) = try c.openEventStream(path([a, b]))
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Type"), "text/event-stream; charset=utf-8")
        var clients = Clients()
        let first = try reader.next(2)
        XCTAssertEqual(first.map(\.event), ["snapshot", "snapshot"])
        XCTAssertEqual(first.map(\.id), ["0.", "0.1"], "the position: each session's last id, in list order")
        XCTAssertEqual(reader.retry, 2000)
        for e in first { try clients.apply(e) }
        // Each name below changes `buttonEnabled`, so each is one event.
        for (nameA, nameB) in [("ann", ""), ("", "b1"), ("al", "")] {
            XCTAssertEqual(try t.post(a, "greeting", "name", #"{"value":"\#(nameA)"}"#).status, 202)
            XCTAssertEqual(try t.post(b, "greeting", "name", #"{"value":"\#(nameB)"}"#).status, 202)
        }
        _ = try t.post(a, "greeting", "greet")
        let events = try reader.next(7)
        for e in events { try clients.apply(e) }
        XCTAssertEqual(events.last?.id, "4.4")
        XCTAssertEqual(clients.sessions[a]?.snapshot, try t.state(a))
        XCTAssertEqual(clients.sessions[b]?.snapshot, try t.state(b))
        XCTAssertEqual(
            clients.seen.filter { $0.hasPrefix(a) }, ["\(a)#0", "\(a)#1", "\(a)#2", "\(a)#3", "\(a)#4"],
            "a's events gapless and in order")
        XCTAssertEqual(Set(clients.seen).count, clients.seen.count, "nothing twice")
    }

    func testTheBrowsersReconnectResumesEverySessionFromThePosition() throws {
        let t = try LiveApp()
        let (a, b) = (try t.createSession(), try t.createSession())
        var clients = Clients()
        var position = ""
        do {
            let c = try WireConnection(port: t.port, timeout: 10)
            let (_, reader) = try c.openEventStream(path([a, b]))
            for e in try reader.next(2) { try clients.apply(e) }
            _ = try t.post(a, "greeting", "name", #"{"value":"x"}"#)
            try clients.apply(XCTUnwrap(reader.next()))
            position = reader.lastEventID
            c.close()
        }
        XCTAssertEqual(position, "1.0")
        // Missed while away: two events of a, one of b.
        _ = try t.post(a, "greeting", "name", #"{"value":""}"#)
        _ = try t.post(a, "greeting", "name", #"{"value":"y"}"#)
        _ = try t.post(b, "greeting", "name", #"{"value":"z"}"#)
        let c = try WireConnection(port: t.port, timeout: 10)
        let (_, reader) = try c.openEventStream(path([a, b]), headers: [("Last-Event-ID", position)])
        let replayed = try reader.next(3)
        XCTAssertFalse(replayed.contains { $0.event == "snapshot" }, "a replay, no snapshot: \(replayed)")
        for e in replayed { try clients.apply(e) }
        XCTAssertEqual(clients.sessions[a]?.snapshot, try t.state(a))
        XCTAssertEqual(clients.sessions[b]?.snapshot, try t.state(b))
        XCTAssertEqual(Set(clients.seen).count, clients.seen.count, "nothing twice")
        // A position that is not this stream's (another length) is ignored: snapshots again.
        let (_, other) = try WireConnection(port: t.port, timeout: 10).openEventStream(
            path([a, b]), headers: [("Last-Event-ID", "3")])
        XCTAssertEqual(try other.next(2).map(\.event), ["snapshot", "snapshot"])
    }

    func testAddingASessionLosesAndRepeatsNothingForTheOthers() throws {
        let t = try LiveApp()
        let (a, b) = (try t.createSession(), try t.createSession())
        var clients = Clients()
        let old = try WireConnection(port: t.port, timeout: 10)
        let (_, oldReader) = try old.openEventStream(path([a]))
        try clients.apply(XCTUnwrap(oldReader.next()))
        _ = try t.post(a, "greeting", "name", #"{"value":"1"}"#)
        try clients.apply(XCTUnwrap(oldReader.next()))
        // A tab opens b: a new stream resumes a where the client is and starts b; the old one closes
        // after. Events meanwhile arrive on either; the client applies each (session, seq) once.
        let last = try XCTUnwrap(clients.sessions[a]?.seq)
        _ = try t.post(a, "greeting", "name", #"{"value":""}"#)
        let new = try WireConnection(port: t.port, timeout: 10)
        let (_, newReader) = try new.openEventStream(path(["\(a):\(last)", b]))
        _ = try t.post(a, "greeting", "name", #"{"value":"3"}"#)
        try clients.apply(XCTUnwrap(oldReader.next()))  // 2 on the old stream
        try clients.apply(XCTUnwrap(oldReader.next()))  // 3 on the old stream
        old.close()
        let fromNew = try newReader.next(3)  // a's 2 (replay), b's snapshot, a's 3 (live)
        for e in fromNew where !clients.seen.contains(seenKey(e)) { try clients.apply(e) }
        XCTAssertEqual(fromNew.filter { $0.event == "snapshot" }.count, 1, "only the new session starts over")
        _ = try t.post(a, "greeting", "greet")
        try clients.apply(XCTUnwrap(newReader.next()))
        XCTAssertEqual(clients.seen.filter { $0.hasPrefix(a) }.count, 5, "a: 0…4, each once")
        XCTAssertEqual(clients.sessions[a]?.snapshot, try t.state(a))
        XCTAssertEqual(clients.sessions[b]?.snapshot, try t.state(b))
    }

    private func seenKey(_ e: SSEEvent) -> String {
        let data = (try? JSONValue.parse(e.data)) ?? .null
        return "\(data["session"]?.stringValue ?? "")#\(data["seq"]?.intValue ?? -1)"
    }

    func testADeletedSessionEndsAloneAndTheStreamEndsWithTheLast() throws {
        let t = try LiveApp()
        let (a, b) = (try t.createSession(), try t.createSession())
        let c = try WireConnection(port: t.port, timeout: 10)
        let (_, reader) = try c.openEventStream(path([a, b]))
        _ = try reader.next(2)
        XCTAssertEqual(try c.requestOnOtherConnection(port: t.port, "DELETE", "/api/sessions/\(a)").status, 204)
        let end = try XCTUnwrap(reader.next())
        XCTAssertEqual(end.event, "end")
        XCTAssertEqual(try JSONValue.parse(end.data), ["session": .string(a), "reason": "deleted"])
        XCTAssertEqual(end.id, ".0", "an ended session has no position")
        _ = try t.post(b, "greeting", "name", #"{"value":"still"}"#)
        XCTAssertEqual(try reader.next()?.event, "greeting", "b goes on")
        XCTAssertEqual(try c.requestOnOtherConnection(port: t.port, "DELETE", "/api/sessions/\(b)").status, 204)
        XCTAssertEqual(try reader.next()?.event, "end")
        XCTAssertNil(try reader.next(timeout: 2), "the stream ends with its last session")
    }

    func testUnknownSessionsAndLimits() throws {
        let t = try LiveApp {
            $0.maxSessionsPerStream = 3
            $0.maxStreamsPerSession = 1
        }
        let a = try t.createSession()
        let gone = "AAAAAAAAAAAAAAAAAAAAAA0"
        func get(_ p: String) throws -> WireResponse { try WireConnection.get(port: t.port, path: p) }
        XCTAssertTrue(try get("/api/events").problem(400).contains("'sessions' is required"))
        XCTAssertTrue(try get(path([a, a])).problem(400).contains("listed twice"))
        XCTAssertTrue(try get(path([a, "x/y"])).problem(400).contains("not a session id"))
        XCTAssertTrue(try get(path([a + ":-1"])).problem(400).contains("must be a number"))
        let four = try (0..<3).map { _ in try t.createSession() } + [a]
        XCTAssertTrue(try get(path(four)).problem(400).contains("at most 3 sessions"))
        XCTAssertEqual(try get(path([gone])).problem(404), "no session '\(gone)'")
        XCTAssertTrue(try get(path([gone, "BBBBBBBBBBBBBBBBBBBBBB0"])).problem(404).contains("none of the 2 sessions"))
        // One known, one unknown: the stream serves the known one and ends the other at once.
        let c = try WireConnection(port: t.port, timeout: 10)
        let (head, reader) = try c.openEventStream(path([gone, a]))
        XCTAssertEqual(head.status, 200)
        let first = try reader.next(2)
        XCTAssertEqual(first.map(\.event), ["end", "snapshot"])
        XCTAssertEqual(try JSONValue.parse(first[0].data)["reason"], "notFound")
        // a's one stream is this member: a second stream of a is refused (the per-session limit).
        try WireConnection.get(port: t.port, path: "/api/sessions/\(a)/events").problem(429)
        let (_, second) = try WireConnection(port: t.port, timeout: 10).openEventStream(path([a, four[0]]))
        let ends = try second.next(2)
        XCTAssertEqual(ends.first?.event, "end")
        XCTAssertEqual(try JSONValue.parse(ends[0].data)["reason"], "tooManyStreams")
        // Closing the stream gives a's slot back.
        c.close()
        try waitUntil("a's stream slot is free", within: 5) {
            (try? WireConnection(port: t.port, timeout: 2).openEventStream("/api/sessions/\(a)/events").0.status) == 200
        }
    }

    func testASlowReaderIsCoalescedPerSessionAndConvergesEverySession() throws {
        let t = try LiveApp(configure: {
            $0.inputRate = 1_000_000
            $0.inputBurst = 1_000_000
            $0.streamHighWaterBytes = 16 * 1024
        })
        let (a, b) = (try t.createSession(), try t.createSession())
        let slow = try WireConnection(port: t.port, timeout: 20)
        let (_, reader) = try slow.openEventStream(path([a, b]))
        var clients = Clients()
        for e in try reader.next(2) { try clients.apply(e) }
        let poster = try WireConnection(port: t.port)
        let long = String(repeating: "x", count: 16_000)
        let rounds = 1000
        for i in 0..<rounds {
            let id = i % 2 == 0 ? a : b
            _ = try t.post(id, "greeting", "name", #"{"value":"\#(i % 4 < 2 ? long + String(i) : "")"}"#, on: poster)
            if i % 4 < 2 { _ = try t.post(id, "greeting", "greet", on: poster) }
        }
        let metrics = try WireConnection.get(port: t.port, path: "/metrics").text
        let coalesced =
            metrics.split(separator: "\n").first { $0.hasPrefix("bff_coalesced_state_frames_total ") }
            .flatMap { Double($0.split(separator: " ")[1]) } ?? 0
        XCTAssertGreaterThan(coalesced, Double(rounds) / 2, "state frames were coalesced instead of queued")
        let (finalA, finalB) = (try t.state(a), try t.state(b))
        var events = 0
        while clients.sessions[a]?.snapshot != finalA || clients.sessions[b]?.snapshot != finalB {
            guard let e = try reader.next(timeout: 20) else { break }
            try clients.apply(e)
            events += 1
        }
        XCTAssertEqual(clients.sessions[a]?.snapshot, finalA)
        XCTAssertEqual(clients.sessions[b]?.snapshot, finalB)
        XCTAssertLessThan(events, rounds, "intermediate states were skipped")
        // Per session, ids only go up (a snapshot may jump forward).
        for id in [a, b] {
            let seqs = clients.seen.filter { $0.hasPrefix(id + "#") }.compactMap { Int($0.split(separator: "#")[1]) }
            XCTAssertEqual(seqs, seqs.sorted(), "\(id)'s events in order")
            XCTAssertEqual(Set(seqs).count, seqs.count, "\(id)'s events once each")
        }
    }

    func testQuietStreamsGetKeepAliveComments() throws {
        let t = try LiveApp(configure: { $0.keepAliveInterval = 0.4 })
        let (a, b) = (try t.createSession(), try t.createSession())
        let (_, reader) = try WireConnection(port: t.port, timeout: 10).openEventStream(path([a, b]))
        _ = try reader.next(2)
        try waitUntil("two keep-alive comments", within: 3) {
            _ = try? reader.next(timeout: 0.1)
            return reader.commentCount >= 2
        }
    }
}

extension WireConnection {
    /// A request on a connection of its own (this one is streaming).
    func requestOnOtherConnection(port: Int, _ method: String, _ path: String) throws -> WireResponse {
        let c = try WireConnection(port: port)
        defer { c.close() }
        return try c.request(method, path)
    }
}
