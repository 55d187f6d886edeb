import Glibc

/// The routes of a `Router` frozen for routing: what every loop reads per request, immutable, so
/// shared without a lock.
///
/// Threading: any thread (immutable).
final class RouteTable: Sendable {
    struct Route: Sendable {
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

    enum Segment: Equatable, Sendable {
        /// A literal segment's bytes (compared with memcmp).
        case literal([UInt8])
        case parameter(String)
    }

    private let routes: [Route]
    /// Literal-only routes by their path ("/healthz"), for paths that need normalising.
    private let exact: [String: Int]
    /// The same as bytes: a request compares lengths, then bytes (a handful of routes; no hashing).
    private let exactBytes: [(path: [UInt8], index: Int)]
    /// Indices of routes with parameters, by segment count (an array: no hashing per request).
    private let parameterized: [[Int]]
    /// Handles requests that match no route (static files). Nil means 404.
    let fallback: HTTPHandler?
    /// Path prefixes served by routes only (`Router.routesOnly(under:name:)`), as segments, with the name
    /// their 404 says ("API").
    let routeOnlyPrefixes: [(segments: [Substring], name: String)]

    init(routes: [Route], fallback: HTTPHandler?, routeOnlyPrefixes: [(segments: [Substring], name: String)] = []) {
        self.routeOnlyPrefixes = routeOnlyPrefixes
        var exact: [String: Int] = [:]
        var exactBytes: [(path: [UInt8], index: Int)] = []
        var parameterized: [[Int]] = []
        for (index, route) in routes.enumerated() {
            if route.segments.allSatisfy({ if case .literal = $0 { return true } else { return false } }) {
                let path = "/" + route.pattern.split(separator: "/").joined(separator: "/")
                exact[path] = index
                exactBytes.append((Array(path.utf8), index))
            } else {
                while parameterized.count <= route.segments.count { parameterized.append([]) }
                parameterized[route.segments.count].append(index)
            }
        }
        self.routes = routes
        self.exact = exact
        self.exactBytes = exactBytes
        self.parameterized = parameterized
        self.fallback = fallback
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
            let count = RouteTable.segmentCount(bytes)
            if RouteTable.needsNormalising(bytes), let index = literalIndex(bytes) {
                return outcome(index: index, method: method, parameters: RouteParameters()) ?? methodNotAllowed([index])
            }
            var matched: [Int] = []
            for index in count < parameterized.count ? parameterized[count] : [] {
                guard let params = RouteTable.matches(routes[index].segments, bytes) else { continue }
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
