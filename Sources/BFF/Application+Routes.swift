import EventHTTP
import JSON
import ViewModels

extension Application {
    func registerRoutes() {
        server.router.routesOnly(under: "/api/", name: "API")  // GET /api/nope is no missing file
        registerSessionRoutes()
        registerMultiplexedRoute()
        registerOperationRoutes()
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
}
