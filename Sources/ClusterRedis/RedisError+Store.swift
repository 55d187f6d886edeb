import ClusterStore
import RedisClient

extension RedisError {
    /// The store error for this Redis error: the scripts' `FENCED`/`GONE` codes, else unavailable.
    var storeError: StoreError {
        if case .shortOfReplicas(let connected, let wanted) = self {
            return .shortOfReplicas(connected: connected, wanted: wanted)
        }
        switch serverCode {
        case "FENCED": return .fenced
        case "GONE": return .gone
        default: return .unavailable(description)
        }
    }
}

extension Result where Failure == RedisError {
    /// Maps the value with `transform` (nil means an unexpected reply) and the error to a `StoreError`.
    func store<T>(_ transform: (Success) -> T?) -> Result<T, StoreError> {
        switch self {
        case .failure(let e): return .failure(e.storeError)
        case .success(let v):
            guard let t = transform(v) else { return .failure(.unavailable("unexpected reply: \(v)")) }
            return .success(t)
        }
    }
}

extension Result where Failure == StoreError {
    /// Maps the value with `transform` (nil means an unexpected reply).
    func storeMap<T>(_ transform: (Success) -> T?) -> Result<T, StoreError> {
        switch self {
        case .failure(let e): return .failure(e)
        case .success(let v):
            guard let t = transform(v) else { return .failure(.unavailable("unexpected reply: \(v)")) }
            return .success(t)
        }
    }
}
