/// Which of a loop's connections to a master a command takes. Redis answers a connection's commands in
/// the order they were written, and `maxInFlight` is counted per connection: work that must be on time
/// whatever else the loop is doing gets a connection of its own.
public enum RedisLane: Sendable, Hashable {
    /// The loop's command connection: everything not named below (the default).
    case commands
    /// Commands followed by `WAIT` (with `RedisClientOptions.separateWaitConnection`): a `WAIT` that
    /// blocks for its time-out never delays the other commands.
    case replicated
    /// Lease renewals: a few batched calls per second, each due within the lease's TTL. On
    /// the command connection they waited behind every command the admitted work issued (a reconnect
    /// storm: a thousand outstanding, `.overloaded` refusals, time-outs) and sessions were lost for it;
    /// here nothing else is queued in front of them. Only commands whose order against the
    /// command connection's does not matter belong here: a renewal changes nothing but a lease's expiry, and
    /// only while the lease is still the one it names.
    case leases
}
