import JSON
import Synchronization
import ViewModels

/// A session's snapshot JSON (`{"seq", "viewModels"}`), encoded once per `seq` by the owner and
/// served as is by any loop. Immutable.
final class EncodedSnapshot: HazardObject {
    let seq: Int
    let json: [UInt8]

    init(seq: Int, json: [UInt8]) {
        self.seq = seq
        self.json = json
    }
}

/// What any loop may read of a session without its owner: the id, the idle clock (a request on any
/// loop keeps the session alive) and the current encoded snapshot, if the owner has one.
///
/// Threading: every member is atomic or immutable; the snapshot cell is written by the owner only.
final class SessionHandle: HazardObject {
    let id: String
    /// The person the session belongs to; nil: anonymous (one word: a reference).
    let owner: SessionOwner?
    /// The key of the login the session belongs to (`LoginCookie.key(of:)`); nil: anonymous.
    var login: String? { owner?.person.loginKey }
    private let activity: Atomic<UInt64>
    /// Set by the owner when the session ends (a reader holding the handle then answers 404).
    let ended = Atomic<Bool>(false)
    /// The current encoded snapshot; empty after a change until the owner encodes the new one.
    let snapshot = HazardCell()

    init(id: String, now: Double, owner: SessionOwner? = nil) {
        self.id = id
        self.owner = owner
        activity = Atomic(now.bitPattern)
    }

    /// Monotonic seconds of the last request or stream change (any loop may set it).
    var lastActivity: Double {
        get { Double(bitPattern: activity.load(ordering: .relaxed)) }
        set { activity.store(newValue.bitPattern, ordering: .relaxed) }
    }

    /// True when a request carrying login `key` (nil: none) may reach the session: an anonymous
    /// session admits everyone, a login's session only that login.
    func admits(_ key: String?) -> Bool { login == nil || login == key }
}

/// The person a session belongs to, and its part of the session's stored form (encoded once), so any node
/// that takes the session over knows whose it is.
final class SessionOwner: Sendable {
    let person: SignedInPerson
    /// `{"loginKey":…,"userID":…,"login":…,"name":…,"avatarURL":…}`.
    let storedJSON: [UInt8]

    init(_ person: SignedInPerson) {
        self.person = person
        var o: JSONObject = [
            "loginKey": .string(person.loginKey), "userID": .int(person.userID), "login": .string(person.login),
        ]
        if let name = person.name { o["name"] = .string(name) }
        if let avatar = person.avatarURL { o["avatarURL"] = .string(avatar) }
        storedJSON = JSONValue.object(o).bytes
    }

    /// The person a stored form's `person` member names, if it is well formed.
    static func person(in stored: JSONValue?) -> SignedInPerson? {
        guard let p = stored, let key = p["loginKey"]?.stringValue, let id = p["userID"]?.intValue,
            let login = p["login"]?.stringValue
        else { return nil }
        return SignedInPerson(
            loginKey: key, userID: id, login: login, name: p["name"]?.stringValue,
            avatarURL: p["avatarURL"]?.stringValue)
    }
}

/// Where `GET /state` finds a session's encoded snapshot without a hop to the session's owner.
/// Single-process mode reads the owner's published snapshot (`LocalSnapshots`); a session whose
/// state lives elsewhere (cluster mode) can be read through another conformance.
protocol SnapshotSource: Sendable {
    /// The current snapshot of session `id` for a reader on loop `reader`, marking the session
    /// active at `now`; nil when it cannot be served without the owner (unknown here, or changed
    /// since it was last encoded): the caller then asks the owner.
    func currentSnapshot(of id: String, login: String?, reader: Int, now: Double) -> EncodedSnapshot?
}

/// The sessions of one loop by id, readable by every loop without a lock: an open-addressing table
/// of atomic references to `SessionHandle`s, written by the owner only, read under hazard pointers.
///
/// It is a cache in front of `LoopSessions.sessions` (the owner's authoritative dictionary): probing
/// is bounded, so a session that found no slot is simply not listed, and its reads take the hop.
///
/// Threading: `insert`/`remove` on the owning loop; `find` on any loop (its own hazard slot).
// @unchecked: a table of atomics behind a raw pointer (the owner writes, hazard pointers guard reads).
final class SessionDirectory: @unchecked Sendable {
    private let table: UnsafeMutablePointer<Atomic<UInt>>
    private let capacity: Int
    static let maxProbes = 8
    private static let tombstone: UInt = 1

    /// A table of at least `sessions * 3 / 2` slots (a power of two, at least 64).
    init(sessions: Int) {
        var c = 64
        while c < sessions + sessions / 2 { c <<= 1 }
        capacity = c
        table = .allocate(capacity: c)
        for i in 0..<c { (table + i).initialize(to: Atomic<UInt>(0)) }
    }

    deinit {
        for i in 0..<capacity {
            let raw = table[i].load(ordering: .acquiring)
            if raw > SessionDirectory.tombstone {
                Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: raw)!).release()
            }
        }
        table.deinitialize(count: capacity)
        table.deallocate()
    }

    /// The first probe slot: ids start with 128 random bits, so their first 8 bytes are a hash.
    private func start(_ id: String) -> Int {
        var h: UInt64 = 0
        var n = 0
        for b in id.utf8 {
            h = h << 8 | UInt64(b)
            n += 1
            if n == 8 { break }
        }
        return Int(truncatingIfNeeded: (h &* 0x9E37_79B9_7F4A_7C15) >> 32) & (capacity - 1)
    }

    /// Lists a session (owner loop). False when its probe window is full (its reads then hop).
    @discardableResult
    func insert(_ handle: SessionHandle) -> Bool {
        var i = start(handle.id)
        for _ in 0..<SessionDirectory.maxProbes {
            if table[i].load(ordering: .relaxed) <= SessionDirectory.tombstone {
                let raw = UInt(bitPattern: Unmanaged<AnyObject>.passRetained(handle).toOpaque())
                table[i].store(raw, ordering: .releasing)
                return true
            }
            i = (i + 1) & (capacity - 1)
        }
        return false
    }

    /// Unlists a session (owner loop); its handle is released once no reader holds it.
    func remove(_ handle: SessionHandle, retired: inout RetiredList, domain: HazardDomain) {
        let target = UInt(bitPattern: Unmanaged<AnyObject>.passUnretained(handle).toOpaque())
        var i = start(handle.id)
        for _ in 0..<SessionDirectory.maxProbes {
            if table[i].load(ordering: .relaxed) == target {
                let next = (i + 1) & (capacity - 1)
                // A tombstone keeps later entries reachable; one followed by an empty slot is not
                // needed (probes stop there anyway), nor are the tombstones just before it.
                if table[next].load(ordering: .relaxed) == 0 {
                    table[i].store(0, ordering: .sequentiallyConsistent)
                    var j = (i - 1) & (capacity - 1)
                    while table[j].load(ordering: .relaxed) == SessionDirectory.tombstone {
                        table[j].store(0, ordering: .releasing)
                        j = (j - 1) & (capacity - 1)
                    }
                } else {
                    table[i].store(SessionDirectory.tombstone, ordering: .sequentiallyConsistent)
                }
                retired.retire(target, domain: domain)
                return
            }
            i = (i + 1) & (capacity - 1)
        }
    }

    /// The listed handle of session `id` (any loop; `slot` is the reader's hazard slot).
    func find(_ id: String, slot: Int, domain: HazardDomain) -> SessionHandle? {
        var i = start(id)
        for _ in 0..<SessionDirectory.maxProbes {
            let raw = table[i].load(ordering: .acquiring)
            if raw == 0 { return nil }
            if raw != SessionDirectory.tombstone, let h = domain.protect(table[i], slot: slot, as: SessionHandle.self),
                h.id == id
            {
                return h
            }
            i = (i + 1) & (capacity - 1)
        }
        return nil
    }
}

/// Single-process mode: the snapshot the owner loop last encoded, read through its directory.
struct LocalSnapshots: SnapshotSource {
    let loops: [LoopSessions]
    let hazards: HazardDomain

    func currentSnapshot(of id: String, login: String?, reader: Int, now: Double) -> EncodedSnapshot? {
        guard let index = SessionID.loopIndex(of: id, loops: loops.count),
            let handle = loops[index].directory.find(id, slot: reader, domain: hazards),
            !handle.ended.load(ordering: .acquiring), handle.admits(login),
            let snapshot = hazards.protect(handle.snapshot, slot: reader, as: EncodedSnapshot.self)
        else { return nil }
        handle.lastActivity = now
        return snapshot
    }
}
