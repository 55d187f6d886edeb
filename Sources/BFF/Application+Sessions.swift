import EventHTTP
import JSON
import ViewModels

extension Application {
    func registerSessionRoutes() {
        let router = server.router
        router.add(.POST, "/api/sessions") { [unowned self] req, res in
            if let cluster { return self.clusterCreate(cluster, req, res) }
            res.send(self.createSession(req))
        }
        router.add(.DELETE, "/api/sessions/:id") { [unowned self] req, res in
            let id = req.parameters["id"] ?? ""
            if let cluster { return self.clusterDelete(cluster, id: id, req, res) }
            self.onOwner(of: id, req, res) { home in
                guard home.sessions[id] != nil else { return Application.noSession(id) }
                home.remove(id, reason: "deleted")
                return HTTPResponse(status: 204)
            }
        }
        router.add(.GET, "/api/sessions/:id/state") { [unowned self] req, res in
            let id = req.parameters["id"] ?? ""
            if let cluster { return self.clusterState(cluster, id: id, req, res) }
            // No hop: the snapshot the owner published, read from this loop.
            if let snapshot = self.snapshots.currentSnapshot(of: id, reader: req.loop.index, now: self.now()) {
                return res.send(HTTPResponse(status: 200, headers: Application.stateHeaders, body: snapshot.json))
            }
            // Changed since last encoded (or unknown): the owner encodes and publishes it.
            self.onOwner(of: id, req, res) { [unowned self] home in
                guard let s = home.sessions[id] else { return Application.noSession(id) }
                s.lastActivity = self.now()
                return HTTPResponse(status: 200, headers: Application.stateHeaders, body: s.encodedSnapshot().json)
            }
        }
        router.add(.GET, "/api/sessions/:id/events") { [unowned self] req, res in self.openStream(req, res) }
        router.add(.POST, "/api/sessions/:id/:viewModel/:input") { [unowned self] req, res in self.postInput(req, res) }
    }

    /// The headers of `GET /state` (built once: no array per request).
    static let stateHeaders: [(String, String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]

    private func createSession(_ req: HTTPRequest) -> HTTPResponse {
        guard reserveSession() else {
            return .problem(
                status: 503,
                detail: "the server holds its maximum of \(configuration.maxSessions) sessions; retry later",
                headers: [("Retry-After", "30")])
        }
        let home = sessionLoops[req.loop.index]
        let id = SessionID.make(loop: req.loop.index)
        let session = Session(id: id, home: home, viewModels: makeViewModels(home.executor), now: now())
        home.add(session)
        let location = "/api/sessions/\(id)"
        return .json(
            201,
            [
                "id": .string(id), "events": .string(location + "/events"), "state": .string(location + "/state"),
                "expiresInSeconds": .int(Int(configuration.sessionIdleTimeout)),
            ], headers: [("Location", location), ("Cache-Control", "no-store")])
    }

    private func openStream(_ req: HTTPRequest, _ res: HTTPResponder) {
        let id = req.parameters["id"] ?? ""
        if let cluster { return clusterOpenStream(cluster, id: id, req, res) }
        guard let home = home(of: id) else { return res.send(Application.noSession(id)) }
        let host = sessionLoops[req.loop.index]
        let lastEventID = req.header("Last-Event-ID").flatMap { Int($0.trimmingHTTPWhitespace()) }
        let isHead = req.method == .HEAD
        let (config, clock) = (configuration, now)
        let work: @Sendable () -> Void = {
            guard let s = home.sessions[id] else {
                return host.loop.execute { res.send(Application.noSession(id)) }
            }
            if isHead {
                return host.loop.execute {
                    res.send(HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")]))
                }
            }
            guard s.streams.count < config.maxStreamsPerSession else {
                let p = HTTPResponse.problem(
                    status: 429,
                    detail: "session '\(id)' already has \(config.maxStreamsPerSession) open event streams (the limit)",
                    headers: [("Retry-After", "5")])
                return host.loop.execute { res.send(p) }
            }
            // The session's own id string, not the request's copy of it (kept as long as the stream).
            let stream = SessionStream(sessionID: s.id, sessionHome: home, host: host)
            s.streams.append(stream)
            s.lastActivity = clock()
            var initial = SSEFrame.retry(milliseconds: config.retryMilliseconds)
            if let last = lastEventID, let frames = s.history.frames(after: last, currentSeq: s.seq) {
                for f in frames { initial += f.frame }
            } else {
                initial += s.snapshotFrame
            }
            let frames = initial
            host.loop.runOrExecute { stream.start(responder: res, initial: frames) }
        }
        home.loop.runOrExecute(work)
    }

    private func postInput(_ req: HTTPRequest, _ res: HTTPResponder) {
        let id = req.parameters["id"] ?? ""
        let vmName = req.parameters["viewModel"] ?? ""
        let input = req.parameters["input"] ?? ""
        let value: JSONValue
        switch InputBody.parse(req) {
        case .failure(let error): return res.send(error)
        case .success(let v): value = v
        }
        let key = req.header("Idempotency-Key")
        if let key, key.isEmpty || key.utf8.count > 255 {
            return res.send(HTTPError(400, "Idempotency-Key must be 1 to 255 characters"))
        }
        if let cluster {
            return clusterInput(cluster, id: id, viewModel: vmName, input: input, value: value, key: key, req, res)
        }
        let clock = now
        onOwner(of: id, req, res) { home in
            guard let s = home.sessions[id] else { return Application.noSession(id) }
            let outcome = s.offer(viewModel: vmName, input: input, value: value, idempotencyKey: key, now: clock())
            return Application.response(to: outcome, sessionID: id)
        }
    }

    /// The one place a session's input outcome becomes HTTP: `202 {"inputSeq"}`, or a problem document
    /// (`429` with `Retry-After`, `404` for an unknown view model or input, `400` for a refused value).
    static func response(to outcome: InputOutcome, sessionID id: String) -> HTTPResponse {
        switch outcome {
        case .accepted(let seq), .duplicate(let seq):
            return .json(202, ["inputSeq": .int(seq)])
        case .rateLimited(let seconds, let rate):
            return .problem(
                status: 429, detail: "session '\(id)' sent more than \(rate) inputs per second; retry in \(seconds) s",
                headers: [("Retry-After", String(seconds))])
        case .unknownViewModel(let name, let known):
            return .problem(
                status: 404, detail: "no view model '\(name)'; known view models: \(known.joined(separator: ", "))")
        case .refused(let error):
            switch error {
            case .unknownInput: return .problem(status: 404, detail: error.detail)
            case .invalidValue: return .problem(status: 400, detail: error.detail)
            }
        }
    }
}

/// The body of an input POST: `{"value": …}`, `{}` or empty, as `application/json`.
enum InputBody {
    static func parse(_ req: HTTPRequest) -> Result<JSONValue, HTTPError> {
        let body = req.body
        let blank = body.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        if blank { return .success(.null) }
        let type = req.header("Content-Type") ?? ""
        guard isJSONMediaType(type) else {
            let got = type.isEmpty ? "no Content-Type" : "'\(type.prefix(100))'"
            return .failure(HTTPError(415, "inputs must be sent as application/json; got \(got)"))
        }
        let parsed: JSONValue
        do {
            parsed = try JSONValue.parse(body)
        } catch {
            return .failure(HTTPError(400, "malformed JSON body: \(error)"))
        }
        guard case .object(let object) = parsed else {
            return .failure(
                HTTPError(400, "the body must be a JSON object {\"value\": …}; got \(parsed.typeDescription)"))
        }
        if let extra = object.keys.first(where: { $0 != "value" }) {
            return .failure(HTTPError(400, "unknown member '\(extra.prefix(64))' in the body; it holds only \"value\""))
        }
        return .success(object["value"] ?? .null)
    }

    /// True when the media type of a Content-Type value (before any `;` parameters, HTTP whitespace
    /// trimmed, ASCII case-insensitive) is `application/json` or `application/<anything>+json`.
    /// On every input: compares bytes in place instead of building lowercased strings.
    static func isJSONMediaType(_ contentType: String) -> Bool {
        var contentType = contentType
        return contentType.withUTF8 { bytes -> Bool in
            func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A }
            var start = 0
            var end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.count
            while start < end && isSpace(bytes[start]) { start += 1 }
            while end > start && isSpace(bytes[end - 1]) { end -= 1 }
            let media = UnsafeBufferPointer(rebasing: bytes[start..<end])
            func hasPrefix(_ p: StaticString, at offset: Int) -> Bool {
                guard offset >= 0, offset + p.utf8CodeUnitCount <= media.count else { return false }
                for k in 0..<p.utf8CodeUnitCount {
                    let c = media[offset + k]
                    let lower = c >= 0x41 && c <= 0x5A ? c + 32 : c
                    if lower != p.utf8Start[k] { return false }
                }
                return true
            }
            guard hasPrefix("application/", at: 0) else { return false }
            if media.count == 16 && hasPrefix("json", at: 12) { return true }
            return media.count > 17 && hasPrefix("+json", at: media.count - 5)
        }
    }
}
