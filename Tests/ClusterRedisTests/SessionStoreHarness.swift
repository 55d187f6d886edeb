import ClusterRedis
import ClusterStore
import EventLoop
import Foundation
import RedisClient
import RedisTestSupport
import XCTest

/// One `SessionStore` under test, called on its loop from async tests, with the hooks the shared
/// contract needs that the protocol does not offer (expiring a lease without waiting for it).
final class SessionStoreHarness: @unchecked Sendable {
    let loop: EventLoop
    let store: SessionStore
    /// Ends the lease of a session as its TTL would (in-memory: advance the clock; Redis: delete
    /// the key, which is what expiry does).
    let expireLease: (String) async -> Void
    /// Makes every stream deadline of a session pass (in-memory: advance the clock past
    /// `SessionStoreContract.streamTTL`; Redis: set every score to 0, a time long past).
    var passStreamDeadlines: (String) async -> Void = { _ in XCTFail("passStreamDeadlines not set") }

    init(loop: EventLoop, store: SessionStore, expireLease: @escaping (String) async -> Void) {
        self.loop = loop
        self.store = store
        self.expireLease = expireLease
    }

    /// Runs `body` on the loop and awaits the completion it is handed.
    func call<T: Sendable>(_ body: @escaping @Sendable (SessionStore, @escaping (T) -> Void) -> Void) async -> T {
        await withCheckedContinuation { k in
            nonisolated(unsafe) let store = self.store
            loop.execute { body(store) { k.resume(returning: $0) } }
        }
    }

    func create(_ id: String, _ holder: String, _ state: String = "s0") async -> Result<Lease, StoreError> {
        await call { s, done in s.create(sessionID: id, holder: holder, state: Array(state.utf8), completion: done) }
    }

    func acquire(_ id: String, _ holder: String) async -> Result<LeaseGrant, StoreError> {
        await call { s, done in s.acquire(sessionID: id, holder: holder, completion: done) }
    }

    func commit(
        _ lease: Lease, _ events: [String], state: String, input: Bool = false, key: String? = nil,
        renews: Bool = true
    ) async -> Result<CommitResult, StoreError> {
        let c = SessionCommit(
            lease: lease, events: events.map { Array($0.utf8) }, state: Array(state.utf8), isInput: input,
            idempotencyKey: key, renewsExpiry: renews)
        return await call { s, done in s.commit(c, completion: done) }
    }

    /// Asks for `items` in one loop iteration (`ask` each, in order), then awaits every answer: what the
    /// store batches from one iteration goes to it together. Answers in the items' order.
    func together<Item: Sendable, Answer: Sendable>(
        _ items: [Item], _ ask: @escaping @Sendable (SessionStore, Item, @escaping (Answer) -> Void) -> Void
    ) async -> [Answer] {
        await call { s, done in
            var got: [Int: Answer] = [:]
            for (i, item) in items.enumerated() {
                ask(s, item) { answer in
                    got[i] = answer
                    if got.count == items.count { done((0..<items.count).map { got[$0]! }) }
                }
            }
        }
    }

    /// `commits` asked for in one loop iteration, answers in order.
    func commitTogether(_ commits: [SessionCommit]) async -> [Result<CommitResult, StoreError>] {
        await together(commits) { s, c, done in s.commit(c, completion: done) }
    }

    /// Renewals of `leases` asked for in one loop iteration, answers in order.
    func renewTogether(_ leases: [Lease]) async -> [Result<Bool, StoreError>] {
        await together(leases) { s, l, done in s.renew(l, completion: done) }
    }

    func renew(_ lease: Lease) async -> Result<Bool, StoreError> {
        await call { s, done in s.renew(lease, completion: done) }
    }
    func release(_ lease: Lease) async -> Result<Bool, StoreError> {
        await call { s, done in s.release(lease, completion: done) }
    }
    func load(_ id: String) async -> Result<SessionSnapshot, StoreError> {
        await call { s, done in s.load(sessionID: id, completion: done) }
    }
    func replay(_ id: String, after: UInt64, limit: Int = 100) async -> Result<ReplayResult, StoreError> {
        await call { s, done in s.replay(sessionID: id, after: after, limit: limit, completion: done) }
    }
    func inputSeq(_ id: String, key: String) async -> Result<UInt64?, StoreError> {
        await call { s, done in s.inputSeq(sessionID: id, idempotencyKey: key, completion: done) }
    }
    func admitStream(_ id: String, _ member: String, limit: Int) async -> Result<Bool, StoreError> {
        await call { s, done in
            s.admitStream(
                sessionID: id, member: member, limit: limit, ttlMilliseconds: SessionStoreContract.streamTTL,
                completion: done)
        }
    }
    func renewStreams(_ id: String, _ members: [String]) async -> Result<String?, StoreError> {
        await call { s, done in
            s.renewStreams(
                sessionID: id, members: members, ttlMilliseconds: SessionStoreContract.streamTTL, completion: done)
        }
    }
    /// Stream checks of `ids` (each with `members`) asked for in one loop iteration, answers in order.
    func checkStreamsTogether(
        _ ids: [String], members: [String], renewsExpiry: Bool = true
    ) async -> [Result<StreamsCheck, StoreError>] {
        await together(ids) { s, id, done in
            s.checkStreams(
                sessionID: id, members: members, ttlMilliseconds: SessionStoreContract.streamTTL,
                renewsExpiry: renewsExpiry, completion: done)
        }
    }
    func releaseStream(_ id: String, _ member: String) async -> Result<Void, StoreError> {
        await call { s, done in s.releaseStream(sessionID: id, member: member, completion: done) }
    }
    func delete(_ lease: Lease) async -> Bool {
        let r: Result<Void, StoreError> = await call { s, done in s.delete(lease, completion: done) }
        if case .success = r { return true }
        return false
    }
}

/// A settable clock for the in-memory store (milliseconds).
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int64 = 1_000_000
    var now: Int64 { lock.withLock { value } }
    func advance(_ ms: Int64) { lock.withLock { value += ms } }
}
