import Dispatch
import Foundation
import GitHubSearch
import Logging
import Primitives

/// One persisted cache entry.
struct StoredEntry: Sendable {
    var key: String
    var request: SearchRequest
    var page: SearchPage
    var etag: String?
    var storedAt: Double
    /// The encoded page (its size is the entry's weight in the byte bound).
    var pageJSON: [UInt8]
    /// LRU order at the time of writing (larger = more recent).
    var lastUse: Int
}

/// The SQLite file behind `SearchCache`: load everything at start, then write-through.
///
/// The file names the upstream its pages came from (`UpstreamIdentity.key` in table `meta`): opened
/// for another upstream (the simulator's file read by a process talking to GitHub, or with another
/// token), its pages are deleted, logged once, and the file is this upstream's from then on. A file
/// of schema 1 (before the upstream was recorded) is rebuilt empty: nobody can say whose pages it has.
///
/// The database connection is owned by a private serial queue: `put` and `delete` are enqueued
/// and return at once (the cache actor never waits on disk), and run in order. `loadAll` runs
/// synchronously at start-up. A file that cannot be opened or read (corrupt, not a database, wrong
/// schema) is logged, deleted and created afresh; if even that fails the store logs once and
/// becomes a no-op (the cache keeps working in memory). Never fatal.
///
/// Threading: any thread. The connection is used on `queue` only, inside its `Lock`: only that serial
/// queue takes the lock, so it is never contended; it makes the confinement checked (`Sendable`
/// without exceptions) and visible to ThreadSanitizer.
final class CacheStore: Sendable {
    static let schemaVersion = 2
    private let queue = DispatchQueue(label: "bff.search-cache.sqlite")
    /// The database (nil when it cannot be opened); taken on `queue` only.
    private let connection = Lock<SQLiteDatabase?>(nil)
    private let logger: Logger
    let path: String
    /// The upstream this process's pages come from (nil: unnamed, the key "").
    let upstream: UpstreamIdentity?

    /// Opens or rebuilds the file at `path`, for pages of `upstream`.
    init(path: String, upstream: UpstreamIdentity? = nil, logger: Logger) {
        self.path = path
        self.upstream = upstream
        self.logger = logger
        queue.sync { connection.withLock { $0 = openHealthy() } }
    }

    /// True when the store has a working database.
    var isOpen: Bool { queue.sync { connection.withLock { $0 != nil } } }

    private func openHealthy() -> SQLiteDatabase? {
        do {
            return try open()
        } catch {
            logger.error(
                "search cache file unusable; rebuilding it",
                metadata: ["path": "\(path)", "error": "\(error)"])
        }
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        do {
            return try open()
        } catch {
            logger.error(
                "search cache file cannot be created; caching in memory only",
                metadata: ["path": "\(path)", "error": "\(error)"])
            return nil
        }
    }

    private func open() throws(SQLiteError) -> SQLiteDatabase {
        let db = try SQLiteDatabase(path: path)
        try db.query("PRAGMA quick_check") { (row) throws(SQLiteError) in
            let result = row.text(0) ?? ""
            if result != "ok" { throw SQLiteError(function: "PRAGMA quick_check", code: 11, message: result) }
        }
        var version = 0
        try db.query("PRAGMA user_version") { row in version = row.int(0) }
        if version != CacheStore.schemaVersion {
            try db.execute("DROP TABLE IF EXISTS search_cache")
        }
        try db.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS search_cache(
                key TEXT PRIMARY KEY, request BLOB NOT NULL, page BLOB NOT NULL, etag TEXT,
                stored_at REAL NOT NULL, last_use INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);
            PRAGMA user_version = \(CacheStore.schemaVersion);
            """)
        try claim(db)
        return db
    }

    /// Makes the file this upstream's: pages another upstream wrote are deleted first.
    private func claim(_ db: SQLiteDatabase) throws(SQLiteError) {
        var recordedKey: String?
        var description = ""
        try db.query("SELECT name, value FROM meta") { row in
            switch row.text(0) {
            case "upstream_key": recordedKey = row.text(1) ?? ""
            case "upstream": description = row.text(1) ?? ""
            default: break
            }
        }
        let key = upstream?.key ?? ""
        if let recordedKey, recordedKey != key {
            var count = 0
            try db.query("SELECT count(*) FROM search_cache") { row in count = row.int(0) }
            try db.execute("DELETE FROM search_cache")
            logger.notice(
                "search cache file was written for another upstream; its pages are not served for this one",
                metadata: [
                    "path": "\(path)", "file-upstream": "\(description)",
                    "upstream": "\(upstream?.description ?? "unnamed")", "dropped": "\(count)",
                ])
        }
        if recordedKey != key {
            try db.query("INSERT OR REPLACE INTO meta(name, value) VALUES('upstream_key', ?)", [.text(key)])
            try db.query(
                "INSERT OR REPLACE INTO meta(name, value) VALUES('upstream', ?)",
                [.text(upstream?.description ?? "unnamed")])
        }
    }

    /// Every readable entry, least recently used first. Unreadable rows are logged and deleted.
    func loadAll() -> [StoredEntry] {
        queue.sync {
            connection.withLock { connection in
                guard let db = connection else { return [] }
                var entries: [StoredEntry] = []
                var bad: [String] = []
                let decoder = JSONDecoder()
                do {
                    try db.query(
                        "SELECT key, request, page, etag, stored_at, last_use FROM search_cache ORDER BY last_use"
                    ) { row in
                        let key = row.text(0) ?? ""
                        let pageJSON = row.blob(2)
                        guard let request = try? decoder.decode(SearchRequest.self, from: Data(row.blob(1))),
                            let page = try? decoder.decode(SearchPage.self, from: Data(pageJSON))
                        else {
                            bad.append(key)
                            return
                        }
                        entries.append(
                            StoredEntry(
                                key: key, request: request, page: page, etag: row.text(3), storedAt: row.double(4),
                                pageJSON: pageJSON, lastUse: row.int(5)))
                    }
                    for key in bad { try db.query("DELETE FROM search_cache WHERE key = ?", [.text(key)]) }
                } catch {
                    logger.error(
                        "search cache file unreadable; rebuilding it",
                        metadata: ["path": "\(path)", "error": "\(error)"])
                    db.close()
                    connection = nil
                    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                    connection = try? open()
                    return []
                }
                if !bad.isEmpty {
                    logger.warning("dropped unreadable search cache rows", metadata: ["count": "\(bad.count)"])
                }
                return entries
            }
        }
    }

    /// Inserts or replaces an entry (asynchronously, in order).
    func put(_ entry: StoredEntry) {
        let requestJSON = (try? JSONEncoder().encode(entry.request)).map(Array.init) ?? []
        queue.async { [self] in
            connection.withLock { connection in
                guard let db = connection else { return }
                do {
                    try db.query(
                        "INSERT OR REPLACE INTO search_cache(key, request, page, etag, stored_at, last_use) VALUES(?,?,?,?,?,?)",
                        [
                            .text(entry.key), .blob(requestJSON), .blob(entry.pageJSON),
                            entry.etag.map { .text($0) } ?? .null,
                            .double(entry.storedAt), .int(entry.lastUse),
                        ])
                } catch {
                    logger.warning("search cache write failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Deletes an entry (asynchronously, in order).
    func delete(key: String) {
        queue.async { [self] in
            connection.withLock { connection in
                do { try connection?.query("DELETE FROM search_cache WHERE key = ?", [.text(key)]) } catch {
                    logger.warning("search cache delete failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Returns once every write enqueued so far is on disk (as far as sqlite is concerned).
    func flush() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in queue.async { c.resume() } }
    }

    /// Closes the database after pending writes.
    func close() {
        queue.sync {
            connection.withLock { connection in
                connection?.close()
                connection = nil
            }
        }
    }
}
