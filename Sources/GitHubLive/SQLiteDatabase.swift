import CSQLite
import Glibc

/// A failed sqlite3 call: the function, the result code and sqlite's message.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// The sqlite3 function (or SQL step) that failed.
    public let function: String
    /// The sqlite3 result code.
    public let code: Int32
    /// `sqlite3_errmsg` at the time of failure.
    public let message: String
    public var description: String { "\(function) failed (\(code)): \(message)" }
}

/// A minimal owner of one sqlite3 connection: execute SQL, prepare statements, read rows.
///
/// Not thread-safe: exactly one thread (or serial queue) may use an instance; `CacheStore` owns
/// its database on its private queue.
final class SQLiteDatabase {
    private var handle: OpaquePointer?

    /// Opens (creating if needed) the database at `path`; ":memory:" for an in-memory one. Missing
    /// parent folders are created, readable by the owner only (0700): a fresh clone has no `var/`.
    init(path: String) throws(SQLiteError) {
        try SQLiteDatabase.createParentFolders(of: path)
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw SQLiteError(function: "sqlite3_open_v2", code: rc, message: message)
        }
        handle = db
        sqlite3_busy_timeout(db, 1000)
    }

    deinit { close() }

    /// `mkdir -p` of the folder holding `path`, new folders with mode 0700 (existing ones are left as they are).
    private static func createParentFolders(of path: String) throws(SQLiteError) {
        guard path != ":memory:", !path.hasPrefix("file:"), let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
        else {
            return
        }
        let folder = String(path[..<slash])
        var prefix = folder.hasPrefix("/") ? "/" : ""
        for part in folder.split(separator: "/") {
            prefix += part
            if mkdir(prefix, 0o700) != 0, case let e = errno, e != EEXIST {
                throw SQLiteError(
                    function: "mkdir(\(prefix))", code: SQLITE_CANTOPEN, message: String(cString: strerror(e)))
            }
            prefix += "/"
        }
    }

    /// Closes the connection (idempotent).
    func close() {
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs one or more statements that return no rows of interest.
    func execute(_ sql: String) throws(SQLiteError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if rc != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? lastMessage
            sqlite3_free(errorMessage)
            throw SQLiteError(function: "sqlite3_exec(\(sql.prefix(40)))", code: rc, message: message)
        }
    }

    /// Prepares `sql`, binds `parameters` (1-based in order) and calls `row` for every result row.
    func query(_ sql: String, _ parameters: [SQLiteValue] = [], row: (Row) throws(SQLiteError) -> Void = { _ in })
        throws(SQLiteError)
    {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw SQLiteError(function: "sqlite3_prepare_v2(\(sql.prefix(40)))", code: rc, message: lastMessage)
        }
        defer { sqlite3_finalize(statement) }
        for (i, value) in parameters.enumerated() {
            let index = Int32(i + 1)
            let bound: Int32
            switch value {
            case .null: bound = sqlite3_bind_null(statement, index)
            case .int(let v): bound = sqlite3_bind_int64(statement, index, Int64(v))
            case .double(let v): bound = sqlite3_bind_double(statement, index, v)
            case .text(let v): bound = sqlite3_bind_text(statement, index, v, -1, csqlite_transient())
            case .blob(let bytes):
                bound = bytes.withUnsafeBytes { raw in
                    sqlite3_bind_blob(statement, index, raw.baseAddress, Int32(raw.count), csqlite_transient())
                }
            }
            guard bound == SQLITE_OK else {
                throw SQLiteError(function: "sqlite3_bind", code: bound, message: lastMessage)
            }
        }
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { return }
            guard step == SQLITE_ROW else {
                throw SQLiteError(function: "sqlite3_step", code: step, message: lastMessage)
            }
            try row(Row(statement: statement))
        }
    }

    private var lastMessage: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed" }

    /// A bound parameter value.
    enum SQLiteValue {
        case null
        case int(Int)
        case double(Double)
        case text(String)
        case blob([UInt8])
    }

    /// The current row of a stepping statement (valid only inside the `row` callback).
    struct Row {
        let statement: OpaquePointer

        func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(statement, column)) }
        func double(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
        func text(_ column: Int32) -> String? {
            guard let p = sqlite3_column_text(statement, column) else { return nil }
            return String(cString: p)
        }
        func blob(_ column: Int32) -> [UInt8] {
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let p = sqlite3_column_blob(statement, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: p, count: count))
        }
    }
}
