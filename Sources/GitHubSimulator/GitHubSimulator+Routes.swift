import EventHTTP
import Foundation

extension GitHubSimulator {
    /// Mounts the simulator on `router`: `GET /search/repositories`, `GET /_sim/stats`,
    /// `GET|POST /_sim/faults`, `POST /_sim/reset`, and the sign-in flow's `GET|POST
    /// /login/oauth/authorize`, `POST /login/oauth/access_token`, `GET /user`,
    /// `DELETE /applications/{client_id}/token`.
    ///
    /// Handlers run on the connection's loop; `handle` does the work there (a search over 5000
    /// repositories takes well under a millisecond to a few ms), latency is a loop timer, and a hang
    /// simply never answers. `now` gives wall time (injectable for tests).
    package func install(on router: Router, now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        let handler: HTTPHandler = { [self] request, responder in
            let simRequest = SimRequest(
                method: request.method.rawValue, path: request.path, query: request.queryItems,
                headers: request.headers, body: request.body)
            switch handle(simRequest, now: now()) {
            case .hang:
                return
            case .respond(let response, let delay):
                let http = HTTPResponse(status: response.status, headers: response.headers, body: response.body)
                if delay > 0 {
                    request.loop.schedule(after: Double(delay) / 1000) { responder.send(http) }
                } else {
                    responder.send(http)
                }
            }
        }
        router.add(.GET, "/search/repositories", handler)
        router.add(.GET, "/_sim/stats", handler)
        router.add(.GET, "/_sim/faults", handler)
        router.add(.POST, "/_sim/faults", handler)
        router.add(.POST, "/_sim/reset", handler)
        router.add(.GET, "/login/oauth/authorize", handler)
        router.add(.POST, "/login/oauth/authorize", handler)
        router.add(.POST, "/login/oauth/access_token", handler)
        router.add(.GET, "/user", handler)
        router.add(.DELETE, "/applications/:client_id/token", handler)
    }
}
