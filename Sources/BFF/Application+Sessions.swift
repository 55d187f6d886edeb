import EventHTTP
import JSON
import SignIn
import ViewModels

/// The session routes: each parses and validates its request, asks the session backend
/// (`SessionBackend`: in-process or cluster, chosen once in `Application.init`), and maps the backend's
/// answer to HTTP here, in one place (`response(to:)`). No route knows which backend runs.
extension Application {
    func registerSessionRoutes() {
        let router = server.router
        router.add(.POST, "/api/sessions") { [unowned self] req, res in
            if self.refusedCrossSite(req, res) { return }
            guard let signIn = self.signIn, let cookie = signIn.cookieValue(of: req) else {
                return self.createSession(req, res, person: nil, clearCookie: nil)
            }
            // A session of the login the cookie names, or, for a login that ended, an anonymous one and
            // the cookie cleared.
            signIn.logins.person(forLoginKey: signIn.key(ofCookie: cookie)) { person in
                let clear = person == nil ? signIn.cookie(for: req).clear : nil
                req.loop.runOrExecute { self.createSession(req, res, person: person, clearCookie: clear) }
            }
        }
        router.add(.DELETE, "/api/sessions/:id") { [unowned self] req, res in
            if self.refusedCrossSite(req, res) { return }
            let id = req.parameters["id"] ?? ""
            self.backend.delete(id, login: self.loginKey(of: req), at: self.loopSessions[req.loop.index]) { result in
                res.sendFromAnyLoop(result.map { HTTPResponse(status: 204) }, sessionID: id)
            }
        }
        router.add(.GET, "/api/sessions/:id/state") { [unowned self] req, res in
            let id = req.parameters["id"] ?? ""
            let host = self.loopSessions[req.loop.index]
            let login = self.loginKey(of: req)
            if let json = self.backend.currentState(of: id, login: login, at: host) {
                return res.send(HTTPResponse(status: 200, headers: Application.stateHeaders, body: json))
            }
            self.backend.state(of: id, login: login, at: host) { result in
                res.sendFromAnyLoop(
                    result.map { HTTPResponse(status: 200, headers: Application.stateHeaders, body: $0) }, sessionID: id
                )
            }
        }
        router.add(.GET, "/api/sessions/:id/events") { [unowned self] req, res in self.openStream(req, res) }
        router.add(.POST, "/api/sessions/:id/:viewModel/:input") { [unowned self] req, res in self.postInput(req, res) }
    }

    /// The key of the login `req` carries a cookie of (nil: none, or sign-in is off).
    func loginKey(of req: HTTPRequest) -> String? { signIn?.loginKey(of: req) }

    /// Answers `403` and returns true when `req` is an unsafe request with the login cookie from another
    /// site (`CrossSiteRule`); nothing else is done for it.
    package func refusedCrossSite(_ req: HTTPRequest, _ res: HTTPResponder) -> Bool {
        guard let signIn, signIn.refusesCrossSite(req) else { return false }
        metrics.crossSiteRefusals.increment()
        res.send(SignInGate.crossSiteRefusal)
        return true
    }

    /// Creates a session (of `person`'s login when given) and answers `201`; `clearCookie`: a
    /// `Set-Cookie` that clears a login cookie naming no live login.
    private func createSession(_ req: HTTPRequest, _ res: HTTPResponder, person: SignedInPerson?, clearCookie: String?)
    {
        let timeout = Int(configuration.sessionIdleTimeout)
        backend.create(at: loopSessions[req.loop.index], client: req.client, person: person) { result in
            res.sendFromAnyLoop(
                result.map { id in
                    let location = "/api/sessions/\(id)"
                    var headers = [("Location", location), ("Cache-Control", "no-store")]
                    if let clearCookie { headers.append(("Set-Cookie", clearCookie)) }
                    return .json(
                        201,
                        [
                            "id": .string(id), "events": .string(location + "/events"),
                            "state": .string(location + "/state"), "expiresInSeconds": .int(timeout),
                        ], headers: headers)
                }, sessionID: nil)
        }
    }

    /// The headers of `GET /state` (built once: no array per request).
    static let stateHeaders: [(String, String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]

    private func openStream(_ req: HTTPRequest, _ res: HTTPResponder) {
        let id = req.parameters["id"] ?? ""
        let host = loopSessions[req.loop.index]
        if req.method == .HEAD {  // the stream's head only: the session must exist
            return backend.state(of: id, login: loginKey(of: req), at: host) { result in
                res.sendFromAnyLoop(
                    result.map { _ in HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")]) },
                    sessionID: id)
            }
        }
        let lastEventID = req.header("Last-Event-ID").flatMap { Int($0.trimmingHTTPWhitespace()) }
        // Which loop runs the session is the backend's business; the stream lives on the request's loop.
        let stream = SessionStream(sessionID: id, host: host, responder: res)
        backend.openStream(stream, sessionID: id, login: loginKey(of: req), lastEventID: lastEventID) { failure in
            res.send(Application.response(to: failure, sessionID: id))
        }
    }

    private func postInput(_ req: HTTPRequest, _ res: HTTPResponder) {
        if refusedCrossSite(req, res) { return }
        let value: JSONValue
        switch InputBody.parse(req) {
        case .failure(let error): return res.send(error)
        case .success(let v): value = v
        }
        let key = req.header("Idempotency-Key")
        if let key, key.isEmpty || key.utf8.count > 255 {
            return res.send(HTTPError(400, "Idempotency-Key must be 1 to 255 characters"))
        }
        let id = req.parameters["id"] ?? ""
        let input = SessionInput(
            sessionID: id, viewModel: req.parameters["viewModel"] ?? "", input: req.parameters["input"] ?? "",
            value: value, idempotencyKey: key, login: loginKey(of: req))
        backend.input(input, at: loopSessions[req.loop.index]) { result in
            res.sendFromAnyLoop(result.map { Application.response(to: $0, sessionID: id) }, sessionID: id)
        }
    }

    /// The one place a session's input outcome becomes HTTP: `202 {"inputSeq"}`, or a problem document
    /// (`429` with `Retry-After`, `404` for an unknown view model or input, `400` for a refused value).
    static func response(to outcome: InputOutcome, sessionID id: String) -> HTTPResponse {
        switch outcome {
        case .accepted(let seq), .duplicate(let seq):
            return accepted(inputSeq: seq)
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

    /// `202 {"inputSeq":N}`, written straight into its bytes: the reply to every input, where a
    /// `JSONObject` built only to be serialized cost more than the rest of the reply (docs/BENCHMARKS.md).
    static func accepted(inputSeq: Int) -> HTTPResponse {
        var body: [UInt8] = []
        body.reserveCapacity(32)
        body.append(contentsOf: #"{"inputSeq":"#.utf8)
        JSONValue.writeInt(inputSeq, into: &body)
        body.append(UInt8(ascii: "}"))
        return .json(202, bytes: body)
    }

    /// `10` for 10.0, `2.5` for 2.5.
    static func number(_ x: Double) -> String { x == x.rounded() ? String(Int(x)) : String(x) }

    /// The one place a `SessionFailure` becomes HTTP (`id`: the session the request named, nil for a
    /// creation): the status, `Retry-After` where a retry helps, and a sentence saying what happened.
    static func response(to failure: SessionFailure, sessionID id: String?) -> HTTPResponse {
        let session = "session '\(id.map { String($0.prefix(64)) } ?? "")'"
        switch failure {
        case .notFound:
            return .problem(status: 404, detail: "no \(session)")
        case .clientCreationRate(let seconds, let rate):
            return .problem(
                status: 429,
                detail: "this client created sessions faster than its limit of \(Self.number(rate)) a second "
                    + "(--client-session-rate); retry in \(seconds) s", headers: [("Retry-After", String(seconds))])
        case .clientSessionLimit(let max):
            return .problem(
                status: 429,
                detail: "this client holds its maximum of \(max) live sessions (--max-sessions-per-client); "
                    + "delete one, or retry once one has expired", headers: [("Retry-After", "60")])
        case .sessionLimit(let max):
            return .problem(
                status: 503, detail: "the server holds its maximum of \(max) sessions; retry later",
                headers: [("Retry-After", "30")])
        case .tooManyStreams(let limit, let clusterWide):
            return .problem(
                status: 429,
                detail: "\(session) already has \(limit) open event streams (the limit"
                    + (clusterWide ? ", counted across the cluster)" : ")"),
                headers: [("Retry-After", "5")])
        case .storeUnavailable:
            return .problem(
                status: 503, detail: "the cluster's Redis is unavailable; retry", headers: [("Retry-After", "1")])
        case .busy:
            return .problem(
                status: 503, detail: "the cluster is busy with the sessions it already serves; retry in a second",
                headers: [("Retry-After", "1")])
        case .moved:
            return .problem(
                status: 503, detail: "\(session) moved to another node; retry", headers: [("Retry-After", "1")])
        case .heldElsewhere(let seconds):
            return .problem(
                status: 503,
                detail: "the node running \(session) is not reachable; another node takes it over when its lease "
                    + "ends (in \(seconds) s at most)", headers: [("Retry-After", String(seconds))])
        case .runnerDidNotAnswer:
            return .problem(
                status: 503,
                detail: "the node running \(session) did not answer in time; the input may have been applied: "
                    + "retry with the same Idempotency-Key", headers: [("Retry-After", "1")])
        case .unreadableState:
            return .problem(status: 500, detail: "the stored state of \(session) is unreadable")
        case .tooLarge(let n):
            return .problem(status: 413, detail: "the state or an event of \(session) is too large (\(n) bytes)")
        case .notReplicated:
            return .problem(
                status: 503,
                detail: "the cluster's Redis replicas did not confirm the change to \(session) in time; it may have "
                    + "been applied: retry with the same Idempotency-Key", headers: [("Retry-After", "1")])
        case .shortOfReplicas:
            return .problem(
                status: 503,
                detail: "the Redis master that keeps \(session) has fewer replicas than this cluster requires "
                    + "(--redis-replica-acks-strict); nothing was applied: retry later",
                headers: [("Retry-After", "2")])
        }
    }
}

extension HTTPResponder {
    /// Sends from whichever loop the caller is on (hops to the responder's loop).
    func sendFromAnyLoop(_ response: HTTPResponse) {
        if loop.inEventLoop { send(response) } else { loop.execute { self.send(response) } }
    }

    /// Sends a backend's answer: the response, or the failure mapped to HTTP (`Application.response(to:)`).
    func sendFromAnyLoop(_ result: Result<HTTPResponse, SessionFailure>, sessionID id: String?) {
        switch result {
        case .success(let response): sendFromAnyLoop(response)
        case .failure(let failure): sendFromAnyLoop(Application.response(to: failure, sessionID: id))
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
        if let value = JSONValue.soleMember("value", of: body) { return .success(value) }  // the usual body
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
