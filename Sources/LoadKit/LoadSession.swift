import JSON
import WireClient

/// Setup and teardown shared by the scenarios: create sessions, delete them, print progress,
/// raise the open-file limit, and pick `inputSeq` out of event data without a full JSON parse.
///
/// Everything here runs on the loop's thread.
package enum LoadSession {
    /// Creates `count` sessions, at most `pool.size` at once, returning their ids; throws if fewer than all
    /// could be created within `timeout` seconds (default: 120, or 20 ms a session for more than 6,000). They are created from the target's `creationSources` (a
    /// connection each, round robin: many clients, as the server's per-client limits expect of a crowd of
    /// users), else through `pool`. A creation refused with `503` or `429` and a `Retry-After` is tried
    /// again after that many seconds (at most 5, with jitter), up to `maxAttempts` times, as a client
    /// should; `retried` counts those retries.
    ///
    /// `headers(i)`: extra headers of the `i`-th creation (e.g. a person's login cookie); the ids come back
    /// in that order.
    package static func create(
        _ count: Int, loop: LoadLoop, pool: RequestPool, timeout: Double? = nil, maxAttempts: Int = 10,
        retried: UnsafeMutablePointer<Int>? = nil, headers: @escaping (Int) -> [(String, String)] = { _ in [] }
    ) throws -> [String] {
        var slots = [String?](repeating: nil, count: count)
        var created = 0
        var failures: [String] = []
        let sources = pool.target.creationSources
        let pools = sources.prefix(count).map { RequestPool(loop: loop, target: pool.target.from(source: $0), size: 1) }
        var next = 0
        var inFlight = 0
        var retries = 0
        func submit(_ i: Int, attempt: Int) {
            inFlight += 1
            (pools.isEmpty ? pool : pools[i % pools.count]).submit(
                "POST", "/api/sessions", headers: [("Content-Type", "application/json")] + headers(i), body: []
            ) { result in
                inFlight -= 1
                switch result {
                case .success(let response) where response.status == 201:
                    if let id = (try? JSONValue.parse(response.body))?["id"]?.stringValue {
                        slots[i] = id
                        created += 1
                    } else {
                        failures.append("201 without an id: \(response.text.prefix(100))")
                    }
                case .success(let response)
                where [429, 503].contains(response.status) && attempt < maxAttempts && retryDelay(response) != nil:
                    retries += 1
                    inFlight += 1  // its place is kept while it waits
                    loop.schedule(after: retryDelay(response)!) {
                        inFlight -= 1
                        submit(i, attempt: attempt + 1)
                    }
                    return
                case .success(let response): failures.append("HTTP \(response.status) \(response.text.prefix(200))")
                case .failure(let error): failures.append("\(error)")
                }
                submitMore()
            }
        }
        func submitMore() {
            while inFlight < pool.size && next < count {
                next += 1
                submit(next - 1, attempt: 1)
            }
        }
        submitMore()
        // The pools must live while the loop runs their requests (the optimizer would end them at their last
        // use above, and a pool that goes away closes its connections).
        let limit = timeout ?? max(120, Double(count) * 0.02)
        withExtendedLifetime(pools) { _ = loop.run(timeout: limit) { created + failures.count >= count } }
        retried?.pointee = retries
        let ids = slots.compactMap { $0 }
        guard ids.count == count else {
            throw WireError.malformed(
                "created \(ids.count) of \(count) sessions (\(retries) retried after 503/429); first failure: "
                    + (failures.first ?? "timeout"))
        }
        return ids
    }

    /// How long a client waits before it asks again after `response`: its `Retry-After` (at most 5 s), ± 50 %
    /// so the clients refused together do not come back together; nil without a `Retry-After`.
    package static func retryDelay(_ response: WireResponse) -> Double? {
        response.header("Retry-After").flatMap(Double.init).map { min(5, $0) * Double.random(in: 0.5...1.5) }
    }

    /// What deleting a run's sessions came to: `deleted` (`204`), `failed` (anything else, or no answer within
    /// the time-out: each counted once), `retried` (`503`/`429` with `Retry-After`, asked again), each delete's
    /// latency (sent → answered, the last attempt's), and the whole phase's seconds.
    package struct DeleteOutcome {
        package var deleted = 0
        package var failed = 0
        package var retried = 0
        package var latency = LatencyHistogram()
        package var seconds = 0.0
        /// The first few failures: the status and the problem's text, or the connection error.
        package var failureSamples: [String] = []
    }

    /// Deletes `ids`, at most `pool.size` at once, waiting up to `timeout` seconds. A delete refused with `503`
    /// or `429` and a `Retry-After` is asked again after that many seconds (at most 5, with jitter), up to
    /// `maxAttempts` times, as a client should; anything else but `204` is a failure, and so is a delete not
    /// answered in time.
    @discardableResult
    package static func delete(
        _ ids: [String], loop: LoadLoop, pool: RequestPool, timeout: Double = 30, maxAttempts: Int = 10
    ) -> DeleteOutcome {
        var outcome = DeleteOutcome()
        let started = LoadLoop.now()
        var next = 0
        var inFlight = 0
        var answered = 0
        func fail(_ why: String) {
            outcome.failed += 1
            if outcome.failureSamples.count < 3 { outcome.failureSamples.append(why) }
        }
        func submit(_ i: Int, attempt: Int) {
            inFlight += 1
            let sent = LoadLoop.now()
            pool.submit("DELETE", "/api/sessions/\(ids[i])") { result in
                inFlight -= 1
                switch result {
                case .success(let response) where response.status == 204:
                    outcome.deleted += 1
                    outcome.latency.record(nanoseconds: LoadLoop.now() - sent)
                case .success(let response)
                where [429, 503].contains(response.status) && attempt < maxAttempts && retryDelay(response) != nil:
                    outcome.retried += 1
                    inFlight += 1  // its place is kept while it waits
                    loop.schedule(after: retryDelay(response)!) {
                        inFlight -= 1
                        submit(i, attempt: attempt + 1)
                    }
                    return
                case .success(let response): fail("HTTP \(response.status) \(response.text.prefix(200))")
                case .failure(let error): fail("\(error)")
                }
                answered += 1
                submitMore()
            }
        }
        func submitMore() {
            while inFlight < pool.size && next < ids.count {
                next += 1
                submit(next - 1, attempt: 1)
            }
        }
        submitMore()
        loop.run(timeout: timeout) { answered == ids.count }
        let unanswered = ids.count - answered
        if unanswered > 0 {
            outcome.failed += unanswered
            if outcome.failureSamples.count < 3 {
                outcome.failureSamples.append("\(unanswered) not answered within \(timeout) s")
            }
        }
        outcome.seconds = Double(LoadLoop.now() - started) / 1e9
        return outcome
    }

    /// Calls `line` once a second on the loop and writes its result to standard error, until
    /// the loop is closed (or released).
    package static func startProgress(loop: LoadLoop, enabled: Bool, started: UInt64, line: @escaping () -> String) {
        guard enabled else { return }
        // The tick lives in the loop's timers: it must not keep the loop alive itself.
        func tick(_ loop: LoadLoop) {
            let elapsed = Double(LoadLoop.now() - started) / 1e9
            StandardError.write("[\(Int(elapsed.rounded()))s] \(line())\n")
            loop.schedule(after: 1) { [weak loop] in if let loop { tick(loop) } }
        }
        loop.schedule(after: 1) { [weak loop] in if let loop { tick(loop) } }
    }

    /// The integer after `"inputSeq":` in `text`, if any.
    package static func inputSeq(in text: String) -> Int? {
        integer(after: "\"inputSeq\":", in: text)
    }

    /// The characters after `prefix` (e.g. `"session":"`) up to the next `"` in `text`, if any (an id, no
    /// escapes).
    package static func string(after prefix: String, in text: String) -> String? {
        scan(text, after: prefix) { bytes, start in
            guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
    }

    /// The integer after `key` (e.g. `"inputSeq":`) in `text`, if any.
    package static func integer(after key: String, in text: String) -> Int? {
        scan(text, after: key) { bytes, start in
            var j = start
            while j < bytes.count && bytes[j] == 0x20 { j += 1 }
            var value = 0
            var digits = 0
            while j < bytes.count && bytes[j] >= 0x30 && bytes[j] <= 0x39 {
                value = value * 10 + Int(bytes[j] - 0x30)
                j += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
    }

    /// `read` of `text`'s bytes from just after the first occurrence of `pattern`; nil if there is none.
    /// The bytes are read in place (an event's data is not copied).
    private static func scan<T>(
        _ text: String, after pattern: String, _ read: (UnsafeBufferPointer<UInt8>, Int) -> T?
    ) -> T? {
        var text = text
        return text.withUTF8 { bytes -> T? in
            let pattern = Array(pattern.utf8)
            guard bytes.count >= pattern.count, let first = pattern.first else { return nil }
            var i = 0
            while i + pattern.count <= bytes.count {
                if bytes[i] == first && (1..<pattern.count).allSatisfy({ bytes[i + $0] == pattern[$0] }) {
                    return read(bytes, i + pattern.count)
                }
                i += 1
            }
            return nil
        }
    }
}
