import Glibc

/// Serves files under one folder for GET and HEAD: content types, `ETag` and `Last-Modified` with
/// `304`, `Cache-Control`, and no way out of the folder (dot-dot, encoded slashes or NULs,
/// backslashes, absolute paths and symlinks that resolve outside are all refused with 404).
///
/// Threading: immutable; its handler runs on whichever loop got the request. Files are read
/// synchronously: they are small, local and usually in the page cache.
public struct StaticFiles: Sendable {
    /// The folder's canonical path (symlinks resolved).
    public let root: String
    let htmlHeaders: [(String, String)]
    /// Files larger than this are refused (the folder holds a web UI, not downloads).
    let maxFileBytes = 8 * 1024 * 1024

    /// A file server for `directory` (relative to the working directory or absolute).
    public init(directory: String, htmlHeaders: [(String, String)] = []) {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        root = realpath(directory, &buf) != nil ? String(cString: buf) : directory
        self.htmlHeaders = htmlHeaders
    }

    /// The router fallback that serves files.
    public var handler: HTTPHandler {
        { request, responder in responder.send(self.response(for: request)) }
    }

    /// The response for `request` (pure apart from reading the file system).
    public func response(for request: HTTPRequest) -> HTTPResponse {
        guard request.method == .GET || request.method == .HEAD else {
            return .problem(
                status: 405,
                detail: "method \(request.method.rawValue) is not allowed on \(request.path); allowed: GET, HEAD",
                headers: [("Allow", "GET, HEAD")])
        }
        guard let relative = safeRelativePath(request.rawPath) else {
            return .problem(status: 404, detail: "no file at \(request.rawPath)")
        }
        var path = relative.isEmpty ? root : root + "/" + relative
        var st = stat()
        guard let resolved = resolveInside(path), stat(resolved, &st) == 0 else {
            return .problem(status: 404, detail: "no file at \(request.path)")
        }
        path = resolved
        if (st.st_mode & S_IFMT) == S_IFDIR {
            guard let index = resolveInside(path + "/index.html"), stat(index, &st) == 0 else {
                return .problem(status: 404, detail: "no file at \(request.path)")
            }
            path = index
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            return .problem(status: 404, detail: "no file at \(request.path)")
        }
        guard st.st_size <= maxFileBytes else { return .problem(status: 404, detail: "no file at \(request.path)") }

        let mtime = Int(st.st_mtim.tv_sec)
        let etag =
            "\"\(String(st.st_size, radix: 16))-\(String(mtime, radix: 16))-\(String(st.st_mtim.tv_nsec, radix: 16))\""
        let type = StaticFiles.contentType(path)
        var headers: [(String, String)] = [
            ("Content-Type", type), ("ETag", etag), ("Last-Modified", HTTPDate.format(mtime)),
            ("Cache-Control", type.hasPrefix("text/html") ? "no-cache" : "public, max-age=300, must-revalidate"),
        ]
        if type.hasPrefix("text/html") { headers += htmlHeaders }
        if let inm = request.header("If-None-Match") {
            let candidates = inm.split(separator: ",").map { $0.trimmingHTTPWhitespace() }
            if candidates.contains(where: { $0 == etag || $0 == "*" || $0 == "W/" + etag }) {
                return HTTPResponse(status: 304, headers: headers)
            }
        } else if let ims = request.header("If-Modified-Since"), let since = HTTPDate.parse(ims), mtime <= since {
            return HTTPResponse(status: 304, headers: headers)
        }
        guard let body = readFile(path, size: Int(st.st_size)) else {
            return .problem(status: 404, detail: "no file at \(request.path)")
        }
        return HTTPResponse(status: 200, headers: headers, body: body)
    }

    /// The decoded, checked relative path, or nil when any segment is hostile.
    func safeRelativePath(_ rawPath: String) -> String? {
        var parts: [String] = []
        for raw in rawPath.split(separator: "/", omittingEmptySubsequences: true) {
            guard let seg = PercentDecoding.decode(raw, plusIsSpace: false) else { return nil }
            if seg == "." || seg == ".." || seg.hasPrefix(".") { return nil }  // no traversal, no dotfiles
            if seg.contains("/") || seg.contains("\\") || seg.utf8.contains(0) { return nil }
            parts.append(seg)
        }
        return parts.joined(separator: "/")
    }

    /// `path` with symlinks resolved, if it exists and lies inside `root`.
    func resolveInside(_ path: String) -> String? {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard realpath(path, &buf) != nil else { return nil }
        let resolved = String(cString: buf)
        guard resolved == root || resolved.hasPrefix(root + "/") else { return nil }
        return resolved
    }

    private func readFile(_ path: String, size: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, size - done) }
            if n <= 0 { return n == 0 ? Array(out[0..<done]) : nil }
            done += n
        }
        return out
    }

    /// The content type for a file name.
    public static func contentType(_ path: String) -> String {
        let ext = path.split(separator: ".").last.map { $0.lowercased() } ?? ""
        switch ext {
        case "html", "htm": return "text/html; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "json", "map": return "application/json"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "ico": return "image/x-icon"
        case "txt": return "text/plain; charset=utf-8"
        case "yaml", "yml": return "application/yaml"
        case "woff2": return "font/woff2"
        case "webmanifest": return "application/manifest+json"
        default: return "application/octet-stream"
        }
    }
}

/// IMF-fixdate formatting and parsing (RFC 9110 §5.6.7).
public enum HTTPDate {
    /// Formats seconds since 1970 as "Sun, 06 Nov 1994 08:49:37 GMT".
    public static func format(_ seconds: Int) -> String {
        var t = time_t(seconds)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        var buf = [CChar](repeating: 0, count: 64)
        let n = strftime(&buf, buf.count, "%a, %d %b %Y %H:%M:%S GMT", &tmv)
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Parses an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"); nil for anything else.
    public static func parse(_ text: String) -> Int? {
        let p = text.split(separator: " ")
        guard p.count == 6, p[5] == "GMT", let day = Int(p[1]), let year = Int(p[3]),
            let month = months.firstIndex(of: String(p[2]))
        else { return nil }
        let t = p[4].split(separator: ":").compactMap { Int($0) }
        guard t.count == 3 else { return nil }
        var tmv = tm()
        tmv.tm_year = Int32(year - 1900)
        tmv.tm_mon = Int32(month)
        tmv.tm_mday = Int32(day)
        tmv.tm_hour = Int32(t[0])
        tmv.tm_min = Int32(t[1])
        tmv.tm_sec = Int32(t[2])
        return Int(timegm(&tmv))
    }
}
