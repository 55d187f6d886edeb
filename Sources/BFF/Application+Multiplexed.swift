import EventHTTP
import JSON

/// `GET /api/events?sessions=ID[:LAST],…`: one event stream for several sessions (a browser's tabs),
/// see `MultiplexedStream` and docs/API.md, "Multiplexed event stream".
extension Application {
    func registerMultiplexedRoute() {
        server.router.add(.GET, "/api/events") { [unowned self] req, res in self.openMultiplexed(req, res) }
    }

    private func openMultiplexed(_ req: HTTPRequest, _ res: HTTPResponder) {
        let sessions: [(id: String, lastEventID: Int?)]
        switch Application.multiplexedSessions(
            req.query["sessions"], lastEventID: req.header("Last-Event-ID"), limit: configuration.maxSessionsPerStream)
        {
        case .failure(let e): return res.send(e)
        case .success(let s): sessions = s
        }
        if req.method == .HEAD {
            return res.send(HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")]))
        }
        let ids = sessions.map(\.id)
        let login = loginKey(of: req)
        let stream = MultiplexedStream(sessions: sessions, host: loopSessions[req.loop.index], responder: res) {
            failure in
            if failure == .notFound, ids.count > 1 {
                return res.send(.problem(status: 404, detail: "none of the \(ids.count) sessions listed exists"))
            }
            res.send(Application.response(to: failure, sessionID: ids[0]))
        }
        for (member, session) in zip(stream.members, sessions) {
            backend.openStream(member, sessionID: session.id, login: login, lastEventID: session.lastEventID) {
                [unowned member] in
                member.refused($0)
            }
        }
    }

    /// The sessions of a multiplexed stream and where each resumes: `sessions` is `ID[:LAST]` items joined
    /// by `,` (1 to `limit`, no id twice); `Last-Event-ID`, when it is a position of this stream (one field
    /// per listed session, joined by `.`, each empty or a number), overrides the `:LAST` parts.
    static func multiplexedSessions(_ list: String?, lastEventID: String?, limit: Int) -> Result<
        [(id: String, lastEventID: Int?)], HTTPError
    > {
        guard let list, !list.isEmpty else {
            return .failure(HTTPError(400, "query parameter 'sessions' is required: session ids joined by ','"))
        }
        let items = list.split(separator: ",", omittingEmptySubsequences: false)
        guard items.count <= limit else {
            return .failure(HTTPError(400, "a stream carries at most \(limit) sessions; got \(items.count)"))
        }
        var out: [(id: String, lastEventID: Int?)] = []
        var seen = Set<Substring>()
        for item in items {
            let parts = item.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let id = parts[0]
            guard SessionID.loopIndex(of: String(id), loops: 1000) != nil else {
                return .failure(HTTPError(400, "'\(item.prefix(64))' in 'sessions' is not a session id"))
            }
            guard seen.insert(id).inserted else {
                return .failure(HTTPError(400, "session '\(id)' is listed twice in 'sessions'"))
            }
            var last: Int?
            if parts.count == 2 {
                guard let n = Int(parts[1]), n >= 0 else {
                    return .failure(
                        HTTPError(
                            400, "the last event id of session '\(id)' must be a number; got '\(parts[1].prefix(20))'"))
                }
                last = n
            }
            out.append((String(id), last))
        }
        // The browser's own reconnect: the position of this very stream (else it is ignored).
        if let header = lastEventID?.trimmingHTTPWhitespace() {
            let fields = header.split(separator: ".", omittingEmptySubsequences: false)
            if fields.count == out.count, fields.allSatisfy({ $0.isEmpty || Int($0).map { $0 >= 0 } == true }) {
                for (i, f) in fields.enumerated() { out[i].lastEventID = Int(f) }
            }
        }
        return .success(out)
    }
}
