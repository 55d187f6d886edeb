/// A request handler: runs on the loop that owns the connection and must eventually call
/// `responder.send(_:)` (or start a stream), on that loop. It must never block.
public typealias HTTPHandler = (HTTPRequest, HTTPResponder) -> Void

/// Maps method and path to handlers. Paths are patterns of literal segments and `:name`
/// parameters ("/api/sessions/:id/events"). A path that matches no pattern is a 404 (or goes to
/// the fallback); a path that matches with another method is a 405 with `Allow`.
///
/// Threading: configure before `HTTPServer.start()`; afterwards it is read-only and shared by loops.
public final class Router: @unchecked Sendable {
    struct Route {
        let pattern: String
        let segments: [Segment]
        var handlers: [HTTPMethod: HTTPHandler]
    }

    enum Segment: Equatable {
        case literal(Substring)
        case parameter(String)
    }

    private var routes: [Route] = []
    /// Handles requests that match no route (static files). Nil means 404.
    public var fallback: HTTPHandler?

    public init() {}

    /// Adds `handler` for `method` on `pattern`.
    public func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler) {
        if let i = routes.firstIndex(where: { $0.pattern == pattern }) {
            routes[i].handlers[method] = handler
            return
        }
        let segments: [Segment] = pattern.split(separator: "/").map { s in
            s.hasPrefix(":") ? .parameter(String(s.dropFirst())) : .literal(s)
        }
        routes.append(Route(pattern: pattern, segments: segments, handlers: [method: handler]))
    }

    /// Adds a synchronous GET handler.
    public func get(_ pattern: String, _ handler: @escaping (HTTPRequest) -> HTTPResponse) {
        add(.GET, pattern) { req, res in res.send(handler(req)) }
    }

    /// Adds a synchronous POST handler.
    public func post(_ pattern: String, _ handler: @escaping (HTTPRequest) -> HTTPResponse) {
        add(.POST, pattern) { req, res in res.send(handler(req)) }
    }

    /// The outcome of routing one request.
    enum Match {
        case handler(HTTPHandler, route: String, parameters: [String: String])
        case methodNotAllowed(allow: [HTTPMethod], route: String)
        case notFound
    }

    func match(method: HTTPMethod, rawPath: String) -> Match {
        let parts = rawPath.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        var allowed: [HTTPMethod] = []
        var allowedRoute = ""
        for route in routes where route.segments.count == parts.count {
            var params: [String: String] = [:]
            var ok = true
            for (seg, part) in zip(route.segments, parts) {
                switch seg {
                case .literal(let lit):
                    if !lit.utf8.elementsEqual(part) { ok = false }
                case .parameter(let name):
                    guard let v = PercentDecoding.decode(Substring(part), plusIsSpace: false) else { ok = false; break }
                    params[name] = v
                }
                if !ok { break }
            }
            guard ok else { continue }
            if let h = route.handlers[method] ?? (method == .HEAD ? route.handlers[.GET] : nil) {
                return .handler(h, route: route.pattern, parameters: params)
            }
            allowed += route.handlers.keys
            allowedRoute = route.pattern
        }
        if allowed.isEmpty { return .notFound }
        if allowed.contains(.GET) && !allowed.contains(.HEAD) { allowed.append(.HEAD) }
        return .methodNotAllowed(allow: allowed.sorted { $0.rawValue < $1.rawValue }, route: allowedRoute)
    }
}
