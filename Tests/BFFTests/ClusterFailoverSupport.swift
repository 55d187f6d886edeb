import EventHTTP
import Foundation
import JSON
import WireClient
import XCTest

/// A steady input load for the failover tests: one client thread per session posting `search/query`
/// inputs (each emits one event carrying its `inputSeq`) to one node, each with its own `Idempotency-Key`,
/// retried with the same key every 50 ms until `202` (what a client does after a `503`), one input every
/// `interval` seconds. Every answer is recorded with its time, so a test can check that the k-th
/// acknowledged input of a session has `inputSeq` k, which sessions saw errors, and when a shard served
/// again.
///
/// Threading: `start`, `stop` and the readers from the test's thread; the clients on threads of their own.
final class InputLoad: Sendable {
    /// One answer: the input number, the HTTP status (0: no answer), the `inputSeq` of a `202`, and when
    /// (`MonotonicClock`, seconds).
    struct Answer: Sendable {
        var k: Int
        var status: Int
        var inputSeq: Int?
        var at: Double
        /// The problem document's `detail` of an error.
        var detail: String?
    }

    let sessions: [(id: String, host: String, port: Int)]
    let interval: Double
    private let answers = Lock<[String: [Answer]]>([:])
    private let stopping = Lock(false)
    private let done = DispatchGroup()

    init(sessions: [(id: String, host: String, port: Int)], interval: Double = 0.03) {
        self.sessions = sessions
        self.interval = interval
    }

    func start() {
        for s in sessions {
            done.enter()
            Thread.detachNewThread { [self] in
                run(s)
                done.leave()
            }
        }
    }

    /// Stops after each client's input under way is acknowledged (or `within` seconds pass).
    func stop(within seconds: Double = 20) {
        stopping.withLock { $0 = true }
        _ = done.wait(timeout: .now() + seconds)
    }

    func answers(of id: String) -> [Answer] { answers.withLock { $0[id] ?? [] } }

    /// The `inputSeq`s of the session's `202`s in the order its inputs were acknowledged (one per input).
    func acknowledged(_ id: String) -> [(k: Int, inputSeq: Int)] {
        answers(of: id).compactMap { a in a.status == 202 ? a.inputSeq.map { (a.k, $0) } : nil }
    }

    private func run(_ s: (id: String, host: String, port: Int)) {
        var k = 0
        let deadline = { MonotonicClock.now() + 60 }()
        while !stopping.withLock({ $0 }), MonotonicClock.now() < deadline {
            k += 1
            while MonotonicClock.now() < deadline {
                let status: Int
                var inputSeq: Int?
                var detail: String?
                do {
                    let c = try WireConnection(host: s.host, port: s.port, timeout: 5)
                    defer { c.close() }
                    let r = try c.request(
                        "POST", "/api/sessions/\(s.id)/search/query",
                        headers: [("Content-Type", "application/json"), ("Idempotency-Key", "\(s.id)-\(k)")],
                        body: Array(#"{"value":"q\#(k)"}"#.utf8))
                    status = r.status
                    inputSeq = (try? JSONValue.parse(r.body))?["inputSeq"]?.intValue
                    detail = (try? JSONValue.parse(r.body))?["detail"]?.stringValue
                } catch {
                    status = 0
                    detail = "\(error)"
                }
                let answer = Answer(
                    k: k, status: status, inputSeq: inputSeq, at: MonotonicClock.now(), detail: detail)
                answers.withLock { $0[s.id, default: []].append(answer) }
                if status == 202 { break }
                usleep(50_000)
            }
            usleep(UInt32(interval * 1e6))
        }
    }
}

/// An event stream read on a thread of its own: every event kept, for a test to ask whether the stream
/// delivered the event of a given input (`search` events carry their `inputSeq`).
///
/// Threading: `stop` and the readers from any thread; the reading on its own thread.
final class StreamCollector: Sendable {
    let id: String
    private let events = Lock<[SSEEvent]>([])
    private let ended = Lock(false)
    private let stopping = Lock(false)

    /// Opens the stream of session `id` at `host:port` (asserting `200`) and starts reading it.
    init(_ id: String, host: String = "127.0.0.1", port: Int) throws {
        self.id = id
        let c = try WireConnection(host: host, port: port, timeout: 10)
        let (head, reader) = try c.openEventStream("/api/sessions/\(id)/events")
        XCTAssertEqual(head.status, 200, "\(head)")
        // The connection and its reader go to the reading thread, which alone uses them from now on.
        nonisolated(unsafe) let (r, connection) = (reader, c)
        Thread.detachNewThread { [self] in
            defer { connection.close() }
            while !stopping.withLock({ $0 }) {
                do {
                    guard let e = try r.next(timeout: 0.5) else { break }
                    events.withLock { $0.append(e) }
                } catch WireError.timeout {
                    continue
                } catch {
                    break
                }
            }
            ended.withLock { $0 = true }
        }
    }

    var all: [SSEEvent] { events.withLock { $0 } }

    /// The `inputSeq`s of the `search` events received, in order.
    var inputSeqs: [Int] {
        all.filter { $0.event == "search" }.compactMap { (try? JSONValue.parse($0.data))?["inputSeq"]?.intValue }
    }

    /// True when the stream delivered the event of input `inputSeq` within `seconds`.
    func delivers(inputSeq: Int, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if inputSeqs.contains(inputSeq) { return true }
            usleep(20_000)
        }
        return inputSeqs.contains(inputSeq)
    }

    /// The ids of the events that carry one, in order (they must only grow).
    var ids: [UInt64] { all.compactMap { $0.id.flatMap { UInt64($0) } } }

    /// Stops reading (the reading thread closes the connection within 0.5 s).
    func stop() { stopping.withLock { $0 = true } }
}
