/// ClusterStore: what the session layer needs from the cluster's shared store, as protocols and
/// values, with in-memory implementations for single-process mode and tests. The Redis
/// implementations are in ClusterRedis; this module imports nothing.

/// Why a store operation failed.
public enum StoreError: Error, Sendable, Equatable {
    /// The caller's fencing token is no longer current: another holder took the session over.
    /// The caller must stop running the session and must not retry.
    case fenced
    /// The session does not exist (expired or deleted).
    case gone
    /// The store cannot be reached or did not answer in time (answer `503` + `Retry-After`).
    /// The operation may or may not have happened.
    case unavailable(String)
    /// A value was over its bound (state blob, event, cache entry).
    case tooLarge(Int)
    /// The write ran on the master but fewer than `wanted` replicas confirmed it within the replica
    /// time-out (`WAIT`, `--redis-replica-acks`): it may be lost if the master dies now, so it must not be
    /// acknowledged (answer `503`); a retry must be idempotent (the `Idempotency-Key` the commit stored).
    case notReplicated(acknowledged: Int, wanted: Int)
    /// Refused before anything was written: the write must reach `wanted` replicas and the session's master
    /// has only `connected` (`--redis-replica-acks-strict`). Nothing happened; answer `503`.
    case shortOfReplicas(connected: Int, wanted: Int)
}
