import Glibc

/// A request handler: runs on the loop that owns the connection and must eventually call
/// `responder.send(_:)` (or start a stream), on that loop. It must never block. `@Sendable`: every
/// loop calls it, at the same time.
public typealias HTTPHandler = @Sendable (HTTPRequest, HTTPResponder) -> Void

/// Maps method and path to handlers. Paths are patterns of literal segments and `:name`
/// parameters ("/api/sessions/:id/events"). A path that matches no pattern is a 404 (or goes to
/// the fallback); a path that matches with another method is a 405 with `Allow`.
///
/// Routes are registered here, under a `Lock`; requests are routed by an immutable `RouteTable`
/// made from them (`table()`), which `HTTPServer.start()` hands to every loop: no lock per request.
///
/// Threading: any thread; routes added after `HTTPServer.start()` do not reach the running loops.
public final class Router: Sendable {
    private struct Routes {
        var routes: [RouteTable.Route] = []
        var fallback: HTTPHandler?
        /// Path prefixes served by routes only, with the name their 404 says.
        var routeOnlyPrefixes: [(segments: [Substring], name: String)] = []
        /// The table of the routes as they are, made on first use after a change.
        var table: RouteTable?
    }
    private let state = Lock(Routes())

    public init() {}

    /// Handles requests that match no route (static files). Nil means 404.
    public var fallback: HTTPHandler? {
        get { state.withLock { $0.fallback } }
        set {
            state.withLock {
                $0.fallback = newValue
                $0.table = nil
            }
        }
    }

    /// Adds `handler` for `method` on `pattern`.
    public func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler) {
        state.withLock { state in
            state.table = nil
            if let i = state.routes.firstIndex(where: { $0.pattern == pattern }) {
                state.routes[i].set(method, handler)
                return
            }
            let segments: [RouteTable.Segment] = pattern.split(separator: "/").map { s in
                s.hasPrefix(":") ? .parameter(String(s.dropFirst())) : .literal(Array(s.utf8))
            }
            var route = RouteTable.Route(pattern: pattern, segments: segments)
            route.set(method, handler)
            state.routes.append(route)
        }
    }

    /// Serves the paths under `prefix` ("/api/") by routes only: a path there that matches no route
    /// (with any method) is a `404` problem "no `name` route matches METHOD PATH", never handed to the
    /// fallback (an unknown API path is not a missing file). A path that matches a route with another
    /// method is still a `405` with `Allow`. Whole segments count: "/apiary" is not under "/api/".
    public func routesOnly(under prefix: String, name: String) {
        state.withLock {
            $0.routeOnlyPrefixes.append((prefix.split(separator: "/"), name))
            $0.table = nil
        }
    }

    /// Adds a synchronous GET handler.
    public func get(_ pattern: String, _ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        add(.GET, pattern) { req, res in res.send(handler(req)) }
    }

    /// Adds a synchronous POST handler.
    public func post(_ pattern: String, _ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        add(.POST, pattern) { req, res in res.send(handler(req)) }
    }

    /// The routes and the fallback as they are now, immutable.
    func table() -> RouteTable {
        state.withLock { state in
            if let table = state.table { return table }
            let table = RouteTable(
                routes: state.routes, fallback: state.fallback, routeOnlyPrefixes: state.routeOnlyPrefixes)
            state.table = table
            return table
        }
    }

    /// Routes one request through the current table (HTTPTesting's `InProcessClient`; the loops use
    /// their table).
    package func dispatch(_ request: consuming HTTPRequest, knownMethod: HTTPMethod?, to responder: HTTPResponder) {
        table().dispatch(request, knownMethod: knownMethod, to: responder)
    }
}

/// Route parameters (`:name` segments), percent-decoded, in pattern order. A route has a handful:
/// looked up by a linear scan of a small array instead of hashing into a dictionary per request.
public struct RouteParameters: Sendable, ExpressibleByDictionaryLiteral {
    private var pairs: [(name: String, value: String)] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { append(name, value) }
    }

    /// The value of parameter `name`, if the route has it.
    public subscript(name: String) -> String? {
        for pair in pairs where pair.name == name { return pair.value }
        return nil
    }

    public var isEmpty: Bool { pairs.isEmpty }

    /// Sets `name` (a later value for the same name replaces the earlier one).
    mutating func append(_ name: String, _ value: String) {
        if let i = pairs.firstIndex(where: { $0.name == name }) {
            pairs[i].value = value
        } else {
            if pairs.isEmpty { pairs.reserveCapacity(4) }
            pairs.append((name, value))
        }
    }
}
