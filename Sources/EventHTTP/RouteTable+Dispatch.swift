extension RouteTable {
    /// Routes one request to its handler, or answers `405` (with `Allow`) or `404` problem JSON, or
    /// hands it to the fallback (not for a path under a route-only prefix: `404` problem). The socket path (`LoopHTTP`) and `InProcessClient` both come here.
    /// `knownMethod` is nil for a method evhttp parsed but HTTPMethod does not list. Takes the
    /// request over (`consuming`): setting its parameters copies no field.
    func dispatch(_ request: consuming HTTPRequest, knownMethod: HTTPMethod?, to responder: HTTPResponder) {
        var request = request
        var match = match(method: request.method, rawPath: request.rawPath)
        let routeOnly: String? = if case .notFound = match { routeOnlyName(request.rawPath) } else { nil }
        if knownMethod == nil, case .notFound = match, fallback != nil, routeOnly == nil {
            match = .methodNotAllowed(allow: [.GET, .HEAD], route: "static")  // what static files allow
        }
        let core = responder.core
        switch match {
        case .handler(let handler, let route, let routeIndex, let parameters):
            core.route = route
            core.routeIndex = routeIndex
            request.parameters = parameters
            handler(request, responder)
        case .methodNotAllowed(let allow, let route):
            core.route = route
            let list = allow.map(\.rawValue).joined(separator: ", ")
            responder.send(
                HTTPResponse.problem(
                    status: 405,
                    detail:
                        "method \(knownMethod?.rawValue ?? "(unrecognized)") is not allowed on \(request.path); allowed: \(list)",
                    headers: [("Allow", list)]))
        case .notFound:
            if let routeOnly {
                let method = knownMethod?.rawValue ?? "(unrecognized method)"
                responder.send(
                    HTTPResponse.problem(status: 404, detail: "no \(routeOnly) route matches \(method) \(request.path)")
                )
            } else if let fallback {
                core.route = "static"
                core.routeIndex = RequestMetrics.staticRoute
                fallback(request, responder)
            } else {
                responder.send(HTTPResponse.problem(status: 404, detail: "no resource at \(request.path)"))
            }
        }
    }
}
