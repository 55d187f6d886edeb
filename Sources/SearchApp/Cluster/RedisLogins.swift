import BFF
import ClusterRedis
import Foundation
import Logging
import Primitives
import RedisClient
import SignIn
import ViewModels

/// Cluster mode's logins, in the cluster's Redis, shared by every node: one string per login under the
/// digest of its cookie (`ClusterKeys.login`), holding who the person is and their token sealed with
/// `BFF_SECRET_KEY` (bound to the login's key), expiring `ttl` after its last use (`GETEX … PX`: every use
/// renews it in the same command). A new login is acknowledged by `--redis-replica-acks` replicas before
/// the browser gets its cookie, so a Redis master's failover loses no acknowledged sign-in.
///
/// The table is bounded by the logins' lifetime (and Redis's `maxmemory`), not by `--max-logins`, which
/// counts a single process's file. Thread-safe; calls hop to the loop of the node's first Redis client.
final class RedisLogins: Logins, Sendable {
    let ttl: Double
    private let sealer: TokenSealer
    private let logger: Logger
    private let target = Lock<(client: RedisClient, keys: ClusterKeys, replicas: Int, timeout: Double)?>(nil)

    init(sealer: TokenSealer, ttl: Double, logger: Logger) {
        self.sealer = sealer
        self.ttl = ttl
        self.logger = logger
    }

    /// Connects the store to the node's Redis (once the application, and its node, are built).
    func connect(_ node: ClusterNode) {
        target.withLock {
            $0 = (
                node.clients[0], ClusterKeys(prefix: node.settings.keyPrefix), node.settings.replicaAcks,
                node.settings.redis.commandTimeout
            )
        }
    }

    private var ttlMilliseconds: RedisArg { RedisArg(Int(ttl * 1000)) }

    func add(_ person: SignedInPerson, token: String) async throws(LoginAddFailure) {
        guard let t = target.withLock({ $0 }), let sealed = try? sealer.seal(token, for: person.loginKey) else {
            throw .unavailable
        }
        let record = LoginStore.Record(
            key: person.loginKey, userID: person.userID, login: person.login, name: person.name,
            avatarURL: person.avatarURL, sealedToken: sealed, lastUsed: Date().timeIntervalSince1970)
        guard let json = try? JSONEncoder().encode(record) else { throw .unavailable }
        let key = RedisArg(t.keys.login(person.loginKey))
        let args = ["SET", key, RedisArg(bytes: Array(json)), "PX", ttlMilliseconds]
        if t.replicas > 0 {
            let r = await t.client.send(args, key: key, waitForReplicas: t.replicas, replicaTimeout: t.timeout)
            guard case .success(let replicated) = r, replicated.replicas >= replicated.wanted else {
                logger.warning("login not stored on enough replicas")
                throw .unavailable
            }
        } else {
            guard case .success = await t.client.send(args, key: key) else { throw .unavailable }
        }
    }

    func person(forLoginKey key: String, reply: @escaping @Sendable (SignedInPerson?) -> Void) {
        Task { reply(await self.record(key, renew: true)?.person) }
    }

    func token(forLoginKey key: String) async -> String? {
        guard let r = await record(key, renew: false) else { return nil }
        return sealer.open(r.sealedToken, for: key)
    }

    func remove(_ key: String) async -> String? {
        guard let t = target.withLock({ $0 }) else { return nil }
        let k = RedisArg(t.keys.login(key))
        guard case .success(let v) = await t.client.send(["GETDEL", k], key: k), let bytes = v.bytes,
            let r = try? JSONDecoder().decode(LoginStore.Record.self, from: Data(bytes))
        else { return nil }
        return sealer.open(r.sealedToken, for: key)
    }

    /// The login `key` names (renewed to a full lifetime when `renew`), nil when unknown or expired.
    private func record(_ key: String, renew: Bool) async -> LoginStore.Record? {
        guard let t = target.withLock({ $0 }) else { return nil }
        let k = RedisArg(t.keys.login(key))
        let args: [RedisArg] = renew ? ["GETEX", k, "PX", ttlMilliseconds] : ["GET", k]
        guard case .success(let v) = await t.client.send(args, key: k), let bytes = v.bytes else { return nil }
        guard let r = try? JSONDecoder().decode(LoginStore.Record.self, from: Data(bytes)), r.key == key else {
            logger.error("a stored login is unreadable")
            return nil
        }
        return r
    }
}

/// Cluster mode's sign-ins under way, in Redis, so GitHub's redirect back may reach any node: one string
/// per `state` (`bff:signin:{state}`, `PX` ten minutes) holding the PKCE verifier, the `returnTo` and the
/// digest of the browser's binding (never the binding), taken with `GETDEL` (good once). Bounded by its
/// lifetime. Thread-safe.
final class RedisSignIns: SignInsUnderWay, Sendable {
    private let target = Lock<(client: RedisClient, prefix: String)?>(nil)

    func connect(_ node: ClusterNode) { target.withLock { $0 = (node.clients[0], node.settings.keyPrefix) } }

    private struct Stored: Codable {
        var v: String
        var r: String
        var b: String
    }

    func start(returnTo: String, verifier: String) async -> (state: String, browser: String)? {
        guard let t = target.withLock({ $0 }) else { return nil }
        let (state, browser) = PendingSignIns.freshPair()
        let stored = Stored(v: verifier, r: returnTo, b: PendingSignIns.digest(ofBrowser: browser))
        guard let json = try? JSONEncoder().encode(stored) else { return nil }
        let key = RedisArg("\(t.prefix):signin:{\(state)}")
        guard
            case .success = await t.client.send(
                ["SET", key, RedisArg(bytes: Array(json)), "PX", "600000", "NX"], key: key)
        else { return nil }
        return (state, browser)
    }

    func take(state: String, browser: String?) async -> StartedSignIn? {
        guard let t = target.withLock({ $0 }), state.utf8.count <= 64 else { return nil }
        let key = RedisArg("\(t.prefix):signin:{\(state)}")
        guard case .success(let v) = await t.client.send(["GETDEL", key], key: key), let bytes = v.bytes,
            let stored = try? JSONDecoder().decode(Stored.self, from: Data(bytes)), let browser,
            PendingSignIns.digest(ofBrowser: browser) == stored.b
        else { return nil }
        return StartedSignIn(verifier: stored.v, returnTo: stored.r)
    }
}
