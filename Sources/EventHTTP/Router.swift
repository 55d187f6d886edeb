import Glibc

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
        /// Handlers indexed by `HTTPMethod.index` (no hashing per request).
        var byMethod: [HTTPHandler?] = Array(repeating: nil, count: HTTPMethod.allCases.count)

        init(pattern: String, segments: [Segment]) {
            self.pattern = pattern
            self.segments = segments
        }

        mutating func set(_ method: HTTPMethod, _ handler: @escaping HTTPHandler) {
            byMethod[method.index] = handler
        }

        /// The methods this route has handlers for.
        var methods: [HTTPMethod] { HTTPMethod.allCases.filter { byMethod[$0.index] != nil } }
    }

    enum Segment: Equatable {
        /// A literal segment's bytes (compared with memcmp).
        case literal([UInt8])
        case parameter(String)
    }

    // Written while routes are registered (before the loops start), read-only afterwards: no
    // dynamic exclusivity check per request (~230 instructions per request for the four).
    @exclusivity(unchecked) private var routes: [Route] = []
    /// Literal-only routes by their path ("/healthz"), for paths that need normalising.
    @exclusivity(unchecked) private var exact: [String: Int] = [:]
    /// The same as bytes: a request compares lengths, then bytes (a handful of routes; no hashing).
    @exclusivity(unchecked) private var exactBytes: [(path: [UInt8], index: Int)] = []
    /// Indices of routes with parameters, by segment count (an array: no hashing per request).
    @exclusivity(unchecked) private var parameterized: [[Int]] = []
    /// Handles requests that match no route (static files). Nil means 404.
    public var fallback: HTTPHandler?
    /// Path prefixes served by routes only (`routesOnly(under:name:)`), as segments, with the name
    /// their 404 says ("API").
    @exclusivity(unchecked) private(set) var routeOnlyPrefixes: [(segments: [Substring], name: String)] = []

    public init() {}

    /// Adds `handler` for `method` on `pattern`.
    public func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler) {
        if let i = routes.firstIndex(where: { $0.pattern == pattern }) {
            routes[i].set(method, handler)
            return
        }
        let segments: [Segment] = pattern.split(separator: "/").map { s in
            s.hasPrefix(":") ? .parameter(String(s.dropFirst())) : .literal(Array(s.utf8))
        }
        var route = Route(pattern: pattern, segments: segments)
        route.set(method, handler)
        routes.append(route)
        let index = routes.count - 1
        if segments.allSatisfy({ if case .literal = $0 { return true } else { return false } }) {
            let path = "/" + pattern.split(separator: "/").joined(separator: "/")
            exact[path] = index
            exactBytes.append((Array(path.utf8), index))
        } else {
            while parameterized.count <= segments.count { parameterized.append([]) }
            parameterized[segments.count].append(index)
        }
    }

    /// Serves the paths under `prefix` ("/api/") by routes only: a path there that matches no route
    /// (with any method) is a `404` problem "no `name` route matches METHOD PATH", never handed to the
    /// fallback (an unknown API path is not a missing file). A path that matches a route with another
    /// method is still a `405` with `Allow`. Whole segments count: "/apiary" is not under "/api/".
    public func routesOnly(under prefix: String, name: String) {
        routeOnlyPrefixes.append((prefix.split(separator: "/"), name))
    }

    /// The name of the route-only prefix `rawPath` is under, if any.
    func routeOnlyName(_ rawPath: String) -> String? {
        guard !routeOnlyPrefixes.isEmpty else { return nil }
        let segments = rawPath.split(separator: "/")
        for p in routeOnlyPrefixes where segments.count >= p.segments.count {
            if zip(segments, p.segments).allSatisfy({ $0 == $1 }) { return p.name }
        }
        return nil
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
        case handler(HTTPHandler, route: String, routeIndex: Int, parameters: RouteParameters)
        case methodNotAllowed(allow: [HTTPMethod], route: String)
        case notFound
    }

    func match(method: HTTPMethod, rawPath: String) -> Match {
        var path = rawPath
        return path.withUTF8 { bytes -> Match in
            for (literal, index) in exactBytes where literal.count == bytes.count {
                if literal.withUnsafeBufferPointer({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) {
                    return outcome(index: index, method: method, parameters: RouteParameters())
                        ?? methodNotAllowed([index])
                }
            }
            let count = Router.segmentCount(bytes)
            if Router.needsNormalising(bytes), let index = literalIndex(bytes) {
                return outcome(index: index, method: method, parameters: RouteParameters()) ?? methodNotAllowed([index])
            }
            var matched: [Int] = []
            for index in count < parameterized.count ? parameterized[count] : [] {
                guard let params = Router.matches(routes[index].segments, bytes) else { continue }
                if let m = outcome(index: index, method: method, parameters: params) { return m }
                matched.append(index)
            }
            return matched.isEmpty ? .notFound : methodNotAllowed(matched)
        }
    }

    /// True for paths with repeated or trailing slashes ("//healthz/"): only those can match a
    /// literal route that the exact lookup missed.
    private static func needsNormalising(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var previousSlash = false
        for b in bytes {
            let slash = b == UInt8(ascii: "/")
            if slash && previousSlash { return true }
            previousSlash = slash
        }
        return previousSlash && bytes.count > 1
    }

    /// The literal route for a path once repeated and trailing slashes are dropped.
    private func literalIndex(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var normalized = ""
        var i = 0
        while i < bytes.count {
            while i < bytes.count && bytes[i] == UInt8(ascii: "/") { i += 1 }
            var j = i
            while j < bytes.count && bytes[j] != UInt8(ascii: "/") { j += 1 }
            if j > i {
                normalized += "/" + String(decoding: UnsafeBufferPointer(rebasing: bytes[i..<j]), as: UTF8.self)
            }
            i = j
        }
        return exact[normalized.isEmpty ? "/" : normalized]
    }

    private func outcome(index: Int, method: HTTPMethod, parameters: RouteParameters) -> Match? {
        // the handler read in place (no copy of the route's handler array)
        guard
            let h = routes[index].byMethod[method.index]
                ?? (method == .HEAD ? routes[index].byMethod[HTTPMethod.GET.index] : nil)
        else {
            return nil
        }
        return .handler(h, route: routes[index].pattern, routeIndex: index, parameters: parameters)
    }

    private func methodNotAllowed(_ indices: [Int]) -> Match {
        var allowed = Set<HTTPMethod>()
        for i in indices { allowed.formUnion(routes[i].methods) }
        if allowed.contains(.GET) { allowed.insert(.HEAD) }
        return .methodNotAllowed(allow: allowed.sorted { $0.rawValue < $1.rawValue }, route: routes[indices[0]].pattern)
    }

    private static func segmentCount(_ path: UnsafeBufferPointer<UInt8>) -> Int {
        var count = 0
        var inSegment = false
        for b in path {
            if b == UInt8(ascii: "/") {
                inSegment = false
            } else if !inSegment {
                inSegment = true
                count += 1
            }
        }
        return count
    }

    /// The route's parameters when `path` matches its segments (empty segments are ignored), else nil.
    /// Walks the bytes in place: no allocation unless the route has parameters.
    private static func matches(_ segments: [Segment], _ path: UnsafeBufferPointer<UInt8>) -> RouteParameters? {
        var params = RouteParameters()
        var i = 0
        let n = path.count
        var segmentIndex = 0
        while true {
            while i < n && path[i] == UInt8(ascii: "/") { i += 1 }
            if i == n { return segmentIndex == segments.count ? params : nil }
            var j = i
            while j < n && path[j] != UInt8(ascii: "/") { j += 1 }
            guard segmentIndex < segments.count else { return nil }
            let part = UnsafeBufferPointer(rebasing: path[i..<j])
            switch segments[segmentIndex] {
            case .literal(let lit):
                guard lit.count == part.count,
                    lit.withUnsafeBufferPointer({ memcmp($0.baseAddress!, part.baseAddress!, part.count) == 0 })
                else { return nil }
            case .parameter(let name):
                if !part.contains(UInt8(ascii: "%")) {
                    params.append(name, String(decoding: part, as: UTF8.self))  // the usual case: one string
                } else {
                    guard
                        let v = PercentDecoding.decode(Substring(decoding: part, as: UTF8.self), plusIsSpace: false)
                    else { return nil }
                    params.append(name, v)
                }
            }
            segmentIndex += 1
            i = j
        }
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
