import Dispatch
import Glibc
import Logging

/// Serves files under one folder for GET and HEAD: content types, `ETag` and `Last-Modified` with
/// `304`, `Cache-Control`, and no way out of the folder (dot-dot, encoded slashes or NULs,
/// backslashes, absolute paths, dotfiles and symlinks that resolve outside are all refused with 404).
///
/// **No disk I/O on a loop.** The folder is read into memory when the server starts: an immutable
/// table from relative path to body and prebuilt headers. A request only looks its path up in the
/// current table. `startWatching` re-scans the folder every few seconds on a thread of its own (a
/// `stat` per file; only new or changed files are read again) and swaps in a new table when anything
/// changed, so edits, new files and deletions show up within one interval.
///
/// **Caps.** A file over `maxFileBytes` (default 8 MiB) is not served (404, as before), and files
/// that would take the table past `maxTotalBytes` (default 64 MiB; smallest paths first, in sorted
/// order) are not either: each is logged once as a warning when a scan skips it. The folder holds a
/// web UI, not downloads; serving big files from a worker is not worth a second code path.
///
/// Symlinks are followed when they resolve inside the folder (files only; a symlinked directory is
/// not descended into, so a link cycle cannot make a scan loop).
///
/// Threading: any thread. The table is swapped under a `Lock` (a lookup holds it for one reference
/// copy); the handler runs on whichever loop got the request; scans run on the watcher thread or on
/// the caller of `rescan()`.
public final class StaticFiles: Sendable {
    /// One servable file.
    struct Entry: Sendable {
        var body: [UInt8]
        var headers: [(String, String)]
        var etag: String
        var mtime: Int
        var isHTML: Bool
        /// What identifies this version of the file (a change of any means: read it again).
        var identity: FileIdentity
    }

    struct FileIdentity: Equatable, Sendable {
        var size: Int
        var mtimeSeconds: Int
        var mtimeNanoseconds: Int
        var inode: UInt
    }

    /// An immutable table of the folder's files.
    final class Table: Sendable {
        let files: [String: Entry]
        let totalBytes: Int
        init(files: [String: Entry], totalBytes: Int) {
            self.files = files
            self.totalBytes = totalBytes
        }
        static let empty = Table(files: [:], totalBytes: 0)
    }

    /// The folder's canonical path (symlinks resolved).
    public let root: String
    let htmlHeaders: [(String, String)]
    /// Files larger than this are not served (the folder holds a web UI, not downloads).
    public let maxFileBytes: Int
    /// The table never holds more than this many bytes of bodies.
    public let maxTotalBytes: Int
    let logger: Logger

    /// What scans change, under `state`'s lock.
    private struct State {
        var table = Table.empty
        var scanCount = 0
        var warned = Set<String>()
        /// The watcher thread, while one runs.
        var watcher: pthread_t?
        /// Callers of `waitForScans`, each woken once `scanCount` reaches its count.
        var scanWaiters: [(count: Int, wake: DispatchSemaphore)] = []
    }
    private let state = Lock(State())
    /// Signalled once by `stopWatching` per watcher thread; the watcher waits on it between scans.
    private let stopSignal = DispatchSemaphore(value: 0)

    /// A file server for `directory` (relative to the working directory or absolute); reads the
    /// folder into memory at once.
    public init(
        directory: String, htmlHeaders: [(String, String)] = [], maxFileBytes: Int = 8 << 20,
        maxTotalBytes: Int = 64 << 20, logger: Logger = Logger(label: "bff.static")
    ) {
        let resolved = StaticFiles.realPath(directory)
        let found = resolved != nil
        root = resolved ?? directory
        self.htmlHeaders = htmlHeaders
        self.maxFileBytes = maxFileBytes
        self.maxTotalBytes = maxTotalBytes
        self.logger = logger
        rescan()
        if !found {
            // Said once at start: `bff` run outside the repository otherwise answers `GET /` with a bare 404.
            logger.warning(
                "static folder not found (relative paths start at the working directory): every file is 404",
                metadata: ["directory": "\(directory)"])
        }
    }

    deinit {
        stopWatching()
    }

    /// The router fallback that serves files.
    public var handler: HTTPHandler {
        { request, responder in responder.send(self.response(for: request)) }
    }

    /// Completed scans so far (the one in `init` included).
    public var scans: Int { state.withLock { $0.scanCount } }

    /// Bytes of file bodies held in memory.
    public var bytesInMemory: Int { currentTable().totalBytes }

    /// Paths (relative, `/`-separated) currently served.
    public var servedPaths: [String] { currentTable().files.keys.sorted() }

    /// The response for `request`: a lookup in the in-memory table, no file system access.
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
        let files = currentTable().files
        // The index path is only built when the path itself is not a file.
        guard let entry = files[relative] ?? files[relative.isEmpty ? "index.html" : relative + "/index.html"] else {
            return .problem(status: 404, detail: "no file at \(request.path)")
        }
        if let inm = request.header("If-None-Match") {
            let candidates = inm.split(separator: ",").map { $0.trimmingHTTPWhitespace() }
            if candidates.contains(where: { $0 == entry.etag || $0 == "*" || $0 == "W/" + entry.etag }) {
                return HTTPResponse(status: 304, headers: entry.headers)
            }
        } else if let ims = request.header("If-Modified-Since"), let since = HTTPDate.parse(ims), entry.mtime <= since {
            return HTTPResponse(status: 304, headers: entry.headers)
        }
        return HTTPResponse(status: 200, headers: entry.headers, body: entry.body)
    }

    /// Starts the watcher thread: a re-scan every `interval` seconds (no-op when already watching
    /// or `interval` is not positive).
    public func startWatching(interval: Double) {
        guard interval > 0 else { return }
        state.withLock { state in
            guard state.watcher == nil else { return }
            let box = Unmanaged.passRetained(WatchArguments(files: self, interval: interval))
            var thread = pthread_t()
            let created = pthread_create(
                &thread, nil,
                { raw in
                    let arguments = Unmanaged<WatchArguments>.fromOpaque(raw!).takeRetainedValue()
                    arguments.files.watch(interval: arguments.interval)
                    return nil
                }, box.toOpaque())
            if created == 0 {
                state.watcher = thread
            } else {
                box.release()
                logger.warning(
                    "static files: no watcher thread; changes will not be picked up", metadata: ["errno": "\(created)"])
            }
        }
    }

    /// Stops the watcher thread and waits for it (returns at once when not watching).
    public func stopWatching() {
        guard let thread = state.withLock({ $0.watcher.take() }) else { return }
        stopSignal.signal()
        pthread_join(thread, nil)
    }

    /// Waits until at least `count` scans have completed, or `timeout` seconds passed; returns
    /// whether they had (tests await the watcher with it).
    public func waitForScans(_ count: Int, timeout: Double) -> Bool {
        let wake: DispatchSemaphore? = state.withLock { state in
            guard state.scanCount < count else { return nil }
            let wake = DispatchSemaphore(value: 0)
            state.scanWaiters.append((count, wake))
            return wake
        }
        guard let wake else { return true }
        if wake.wait(timeout: .now() + timeout) == .success { return true }
        return state.withLock { state in
            state.scanWaiters.removeAll { $0.wake === wake }
            return state.scanCount >= count
        }
    }

    /// Scans the folder now (off any loop: on the watcher thread, at start, or in tests) and swaps
    /// in a new table when a file was added, changed or removed. Returns whether it swapped.
    @discardableResult
    public func rescan() -> Bool {
        let old = currentTable()
        var found: [(path: String, resolved: String, identity: FileIdentity)] = []
        walk(directory: root, relative: "", depth: 0, into: &found)
        found.sort { $0.path < $1.path }
        var files: [String: Entry] = [:]
        var total = 0
        var skipped: [(String, String)] = []
        for file in found {
            guard file.identity.size <= maxFileBytes else {
                skipped.append((file.path, "larger than the per-file cap of \(maxFileBytes) bytes"))
                continue
            }
            guard total + file.identity.size <= maxTotalBytes else {
                skipped.append((file.path, "past the in-memory cap of \(maxTotalBytes) bytes"))
                continue
            }
            if let previous = old.files[file.path], previous.identity == file.identity {
                files[file.path] = previous
                total += previous.body.count
            } else if let entry = load(file.resolved, identity: file.identity) {
                files[file.path] = entry
                total += entry.body.count
            }
        }
        let changed =
            files.count != old.files.count
            || files.contains { path, entry in old.files[path].map { $0.identity != entry.identity } ?? true }
        let newTable = changed ? Table(files: files, totalBytes: total) : nil
        let (newWarnings, woken) = state.withLock { state in
            if let newTable { state.table = newTable }
            let newWarnings = skipped.filter { state.warned.insert($0.0).inserted }
            state.scanCount += 1
            let done = state.scanCount
            let woken = state.scanWaiters.filter { $0.count <= done }.map(\.wake)
            state.scanWaiters.removeAll { $0.count <= done }
            return (newWarnings, woken)
        }
        for wake in woken { wake.signal() }
        for (path, why) in newWarnings {
            logger.warning("static file not served", metadata: ["path": "\(path)", "reason": "\(why)"])
        }
        return changed
    }

    private final class WatchArguments {
        let files: StaticFiles
        let interval: Double
        init(files: StaticFiles, interval: Double) {
            self.files = files
            self.interval = interval
        }
    }

    /// The watcher thread: a scan every `interval` seconds until `stopWatching` signals.
    private func watch(interval: Double) {
        while stopSignal.wait(timeout: .now() + interval) == .timedOut {
            rescan()
        }
    }

    private func currentTable() -> Table {
        state.withLock { $0.table }
    }

    /// Collects every regular file under `directory` that may be served (no dotfiles; symlinks only
    /// when they resolve to a regular file inside the root).
    private func walk(
        directory: String, relative: String, depth: Int,
        into found: inout [(path: String, resolved: String, identity: FileIdentity)]
    ) {
        guard depth < 32, let dir = opendir(directory) else { return }
        defer { closedir(dir) }
        while let item = readdir(dir) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix(".") || name.contains("\\") { continue }  // dotfiles, ".", ".."
            let path = directory + "/" + name
            let rel = relative.isEmpty ? name : relative + "/" + name
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                walk(directory: path, relative: rel, depth: depth + 1, into: &found)
            case S_IFREG:
                found.append((rel, path, identity(st)))
            case S_IFLNK:
                guard let resolved = resolveInside(path), stat(resolved, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG
                else { continue }
                found.append((rel, resolved, identity(st)))
            default:
                continue
            }
        }
    }

    private func identity(_ st: stat) -> FileIdentity {
        FileIdentity(
            size: Int(st.st_size), mtimeSeconds: Int(st.st_mtim.tv_sec), mtimeNanoseconds: Int(st.st_mtim.tv_nsec),
            inode: UInt(st.st_ino))
    }

    private func load(_ path: String, identity: FileIdentity) -> Entry? {
        guard let body = readFile(path, size: identity.size) else { return nil }
        let mtime = identity.mtimeSeconds
        let etag =
            "\"\(String(identity.size, radix: 16))-\(String(mtime, radix: 16))-\(String(identity.mtimeNanoseconds, radix: 16))\""
        let type = StaticFiles.contentType(path)
        let isHTML = type.hasPrefix("text/html")
        var headers: [(String, String)] = [
            ("Content-Type", type), ("ETag", etag), ("Last-Modified", HTTPDate.format(mtime)),
            ("Cache-Control", isHTML ? "no-cache" : "public, max-age=300, must-revalidate"),
        ]
        if isHTML { headers += htmlHeaders }
        return Entry(body: body, headers: headers, etag: etag, mtime: mtime, isHTML: isHTML, identity: identity)
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
        guard let resolved = StaticFiles.realPath(path) else { return nil }
        guard resolved == root || resolved.hasPrefix(root + "/") else { return nil }
        return resolved
    }

    /// `realpath(3)` of `path`, nil when it does not resolve.
    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
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
