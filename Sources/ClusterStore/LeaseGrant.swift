/// The answer to a lease acquisition.
public enum LeaseGrant: Sendable, Equatable {
    /// The caller holds the lease (a new token if it did not hold it already), with the session's
    /// committed snapshot to restore from.
    case acquired(Lease, SessionSnapshot)
    /// Another holder has it for `remainingMilliseconds` more (unless renewed or released).
    case heldBy(String, remainingMilliseconds: Int)
}
