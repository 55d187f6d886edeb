import BFF
import Dispatch
import Foundation
import Logging
import Primitives
import SignIn
import ViewModels

/// Where logins are kept: one process's file (`LoginStore`) or the cluster's Redis (`RedisLogins`).
/// Each login is keyed by the digest of its cookie and holds its token sealed (`TokenSealer`).
protocol Logins: LoginDirectory {
    /// Stores a new login; it is durable (on the file, or acknowledged by Redis) when this returns.
    func add(_ person: SignedInPerson, token: String) async throws(LoginAddFailure)
    /// The token of the live login `key` names, renewing nothing.
    func token(forLoginKey key: String) async -> String?
    /// Forgets a login; returns its token (to revoke it at GitHub), if it was known.
    func remove(_ key: String) async -> String?
}

/// Why a login could not be stored.
enum LoginAddFailure: Error, Equatable {
    /// The table holds its maximum of logins (`--max-logins`).
    case full(Int)
    /// The store could not be reached (cluster mode: Redis).
    case unavailable
}

extension LoginStore: Logins {
    func add(_ person: SignedInPerson, token: String) async throws(LoginAddFailure) {
        try addNow(person, token: token)
    }
    func token(forLoginKey key: String) async -> String? { tokenNow(forLoginKey: key) }
    func remove(_ key: String) async -> String? { removeNow(key) }
}

/// The logins of one process: who each is and their GitHub token, sealed (`TokenSealer`, AES-GCM under
/// `BFF_SECRET_KEY`, bound to the login's key), kept in memory and in a file under `var/` (mode 0600) so
/// a restart keeps everyone signed in. Keyed by the login's key (`LoginCookie.key(of:)`), so neither
/// memory nor the file holds a cookie a browser would present, nor a token in plaintext.
///
/// A login lasts `ttl` seconds from its last use (sliding); at most `capacity` are kept (a new sign-in
/// past it first drops expired ones, then is refused). The file is rewritten after a sign-in (before it
/// is answered), after a sign-out, and after a use at most once a minute, on a queue of its own.
/// Thread-safe.
final class LoginStore: LoginDirectory, Sendable {
    /// One login as stored.
    struct Record: Codable, Equatable {
        var key: String
        var userID: Int
        var login: String
        var name: String?
        var avatarURL: String?
        /// The token, sealed for `key`.
        var sealedToken: String
        /// Wall-clock seconds of the last use (the sliding lifetime counts from here).
        var lastUsed: Double

        var person: SignedInPerson {
            SignedInPerson(loginKey: key, userID: userID, login: login, name: name, avatarURL: avatarURL)
        }
    }

    let ttl: Double
    let capacity: Int
    private let path: String?
    private let sealer: TokenSealer
    private let wallClock: @Sendable () -> Double
    private let logger: Logger
    private let state = Lock<(records: [String: Record], lastPersisted: Double, dirty: Bool)>(([:], 0, false))
    private let writer = DispatchQueue(label: "bff.logins.file")

    /// Opens the store; `path` nil keeps logins in memory only. A file that cannot be read is logged and
    /// set aside (`….unreadable`), and the store starts empty: everyone signs in again.
    init(
        path: String?, sealer: TokenSealer, ttl: Double, capacity: Int, logger: Logger,
        wallClock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.path = path
        self.sealer = sealer
        self.ttl = ttl
        self.capacity = max(1, capacity)
        self.logger = logger
        self.wallClock = wallClock
        guard let path, FileManager.default.fileExists(atPath: path) else { return }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            let records = try JSONDecoder().decode([Record].self, from: data)
            let now = wallClock()
            let live = records.filter { now - $0.lastUsed < ttl }
            state.withLock { $0.records = Dictionary(live.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a }) }
            logger.info(
                "logins loaded", metadata: ["logins": "\(live.count)", "expired": "\(records.count - live.count)"])
        } catch {
            logger.error("logins file unreadable; everyone signs in again", metadata: ["path": "\(path)"])
            try? FileManager.default.moveItem(atPath: path, toPath: path + ".unreadable")
        }
    }

    /// Stores a new login for `person` (whose `loginKey` is its key) with `token`, and waits until it is
    /// in the file (call it off the event loops).
    func addNow(_ person: SignedInPerson, token: String) throws(LoginAddFailure) {
        let sealed: String
        do {
            sealed = try sealer.seal(token, for: person.loginKey)
        } catch {
            preconditionFailure("AES-GCM sealing failed")  // only with a malformed key, refused at start
        }
        let now = wallClock()
        let record = Record(
            key: person.loginKey, userID: person.userID, login: person.login, name: person.name,
            avatarURL: person.avatarURL, sealedToken: sealed, lastUsed: now)
        let added = state.withLock { s -> Bool in
            if s.records.count >= capacity { s.records = s.records.filter { now - $0.value.lastUsed < ttl } }
            guard s.records.count < capacity else { return false }
            s.records[record.key] = record
            return true
        }
        guard added else { throw .full(capacity) }
        // On the file before the browser gets its cookie: a restart right after keeps this login.
        persist(force: true)
        flush()
    }

    /// The person of a live login, renewing it (any thread; `reply` at once).
    func person(forLoginKey key: String, reply: @escaping @Sendable (SignedInPerson?) -> Void) {
        reply(touch(key)?.person)
    }

    /// The live login `key` names, renewed to `now`; nil (and forgotten) when expired.
    func touch(_ key: String) -> Record? {
        let now = wallClock()
        let found = state.withLock { s -> Record? in
            guard var r = s.records[key] else { return nil }
            guard now - r.lastUsed < ttl else {
                s.records.removeValue(forKey: key)
                s.dirty = true
                return nil
            }
            r.lastUsed = now
            s.records[key] = r
            s.dirty = true
            return r
        }
        persist(force: false)
        return found
    }

    /// The token of the live login `key` names (opened from its sealed form), renewing nothing.
    func tokenNow(forLoginKey key: String) -> String? {
        let now = wallClock()
        guard let r = state.withLock({ $0.records[key] }), now - r.lastUsed < ttl else { return nil }
        return sealer.open(r.sealedToken, for: key)
    }

    /// Forgets a login; returns its token (to revoke it at GitHub), if it was known.
    func removeNow(_ key: String) -> String? {
        guard let r = state.withLock({ $0.records.removeValue(forKey: key) }) else { return nil }
        persist(force: true)
        return sealer.open(r.sealedToken, for: key)
    }

    /// Live logins (expired ones included until they are next looked at).
    var count: Int { state.withLock { $0.records.count } }

    /// Waits until every write queued so far reached the file (tests, shutdown).
    func flush() { writer.sync {} }

    /// Writes the file off the caller's thread: at once after a sign-in or sign-out, at most once a
    /// minute for renewals.
    private func persist(force: Bool) {
        guard let path else { return }
        let now = wallClock()
        let records: [Record]? = state.withLock { s in
            guard force || (s.dirty && now - s.lastPersisted >= 60) else { return nil }
            s.lastPersisted = now
            s.dirty = false
            return Array(s.records.values)
        }
        guard let records else { return }
        let logger = self.logger
        writer.async {
            do {
                try LoginStore.write(records.sorted { $0.key < $1.key }, to: path)
            } catch {
                logger.error("logins file not written", metadata: ["path": "\(path)", "error": "\(error)"])
            }
        }
    }

    /// Writes `records` to `path` atomically (a temporary file renamed over it), mode 0600.
    static func write(_ records: [Record], to path: String) throws {
        let data = try JSONEncoder().encode(records)
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
        else { throw CocoaError(.fileWriteUnknown) }
        if rename(temporary, path) != 0 { throw CocoaError(.fileWriteUnknown) }
    }
}

/// Where the secret key comes from: `BFF_SECRET_KEY` when set (it must be good), else a single process
/// keeps one in a file under `var/` (mode 0600), made on first start.
enum SecretKeySource {
    /// The sealer for `environment` (the variable's value, or nil), or the sentence why not.
    static func sealer(environment: String?, keyFile: String) throws(SecretKeyError) -> TokenSealer {
        if let environment { return try TokenSealer(base64Key: environment) }
        if let data = FileManager.default.contents(atPath: keyFile) {
            do {
                return try TokenSealer(base64Key: String(decoding: data, as: UTF8.self))
            } catch {
                throw SecretKeyError(description: "the key file \(keyFile) is damaged: \(error.description)")
            }
        }
        let key = TokenSealer.newBase64Key()
        let directory = (keyFile as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        guard
            FileManager.default.createFile(
                atPath: keyFile, contents: Data(key.utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw SecretKeyError(description: "BFF_SECRET_KEY is not set and \(keyFile) could not be created")
        }
        return try TokenSealer(base64Key: key)
    }
}
