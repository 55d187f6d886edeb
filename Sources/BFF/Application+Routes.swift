import EventHTTP
import GitHubSearch
import JSON
import ViewModels

extension Application {
    func registerRoutes() {
        server.router.routesOnly(under: "/api/", name: "API")  // GET /api/nope is no missing file
        registerSessionRoutes()
        registerMultiplexedRoute()
        registerOperationRoutes()
        registerSearchRoutes()
        if configuration.testHooks { registerTestHooks() }
        if configuration.benchRoutes {
            let response = HTTPResponse(
                status: 200, headers: [("Content-Type", "application/json")],
                body: JSONValue.object(["ok": true, "service": "bff"]).bytes)
            server.router.add(.GET, "/bench/json") { _, res in res.send(response) }
        }
    }

    private func registerOperationRoutes() {
        let router = server.router
        router.get("/healthz") { _ in .json(200, ["status": "ok"], headers: [("Cache-Control", "no-store")]) }
        router.get("/readyz") { [unowned self] _ in
            switch self.server.state {
            case .running:
                if let reason = self.backend.unreadyReason {
                    return .problem(status: 503, detail: reason, headers: [("Retry-After", "1")])
                }
                let degraded = self.backend.degradation
                if degraded.isEmpty {
                    return .json(200, ["status": "ready"], headers: [("Cache-Control", "no-store")])
                }
                // Ready, but some sessions cannot be served or acknowledged as usual: say which, and why.
                return .json(
                    200, ["status": "degraded", "problems": .array(degraded.map { .string($0) })],
                    headers: [("Cache-Control", "no-store")])
            case .starting:
                return .problem(status: 503, detail: "the server is starting", headers: [("Retry-After", "1")])
            case .draining, .stopped:
                return .problem(status: 503, detail: "the server is shutting down", headers: [("Retry-After", "5")])
            }
        }
        router.add(.GET, "/metrics") { [unowned self] req, res in
            // Request metrics are kept per loop: each loop hands over a copy, merged here.
            self.server.requestMetricsExposition(replyOn: req.loop) { requests in
                var body = self.metrics.render()
                body.append(contentsOf: requests.utf8)
                res.send(
                    HTTPResponse(
                        status: 200,
                        headers: [
                            ("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Cache-Control", "no-store"),
                        ],
                        body: body))
            }
        }
    }

    /// `POST /api/_test/status` (only with `--test-hooks`): sets the shared status (and, with
    /// `"blockedUntil": <seconds since 1970>`, the app-wide search block every session follows), e.g.
    /// `{"reachable": false, "message": "…", "rateLimit": {"limit": 30, "remaining": 0, "resetAt": 1790000000}}`.
    /// It goes where the gateway's reports go (`statusReport`): in cluster mode to every node, as a status
    /// GitHub caused would.
    private func registerTestHooks() {
        server.router.add(.POST, "/api/_test/status") { [unowned self] req, res in
            res.send(self.applyTestStatus(req.body))
        }
    }

    private func applyTestStatus(_ body: [UInt8]) -> HTTPResponse {
        guard let v = try? JSONValue.parse(body), case .object(let o) = v else {
            return .problem(status: 400, detail: "expected a JSON object {\"reachable\", \"message\", \"rateLimit\"}")
        }
        var s = UpstreamStatus(reachable: o["reachable"]?.boolValue ?? true, message: o["message"]?.stringValue)
        if let r = o["rateLimit"]?.objectValue, let limit = r["limit"]?.intValue,
            let remaining = r["remaining"]?.intValue,
            let reset = r["resetAt"]?.intValue
        {
            s.rateLimit = RateLimit(limit: limit, remaining: remaining, resetAt: reset, resource: "search")
        }
        s.blockedUntil = o["blockedUntil"]?.intValue
        (statusReport.withLock { $0 } ?? statusUpdater)(s)
        return .json(202, ["accepted": true])
    }
}
