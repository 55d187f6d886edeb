/// What a sentinel locator believes about its master from the sentinels' answers (`SENTINEL MASTER`:
/// an address and a `config-epoch`) and announcements (`+switch-master`): the rules, apart from the
/// connections, so each is tested on its own (`SentinelAnswersTests`).
///
/// - Each failover raises the master's `config-epoch`. A sentinel reporting a lower one than the highest
///   seen has not heard of the last failover yet (sentinels learn it from each other within a second or
///   two): stale, unless every sentinel in a row says so (the set was made anew and its epochs start
///   again).
/// - The master this locator has just left is not taken back on an answer whose epoch is not above the
///   one it was left at. During a failover the leading sentinel raises the epoch before it switches the
///   address, so it can report the old master at the new epoch; and after a `+switch-master`, which
///   carries no epoch, a sentinel that has not heard of the failover reports the old master at the old
///   one. Either, believed, sent the client back to the dead master and then forward again (three
///   failovers counted for one, `RedisSentinelTests`). A failover back to it raises
///   the epoch again, and a `+switch-master` naming it is always believed.
///
/// Threading: a value; the locator keeps it on its loop.
struct SentinelAnswers {
    /// The decision on one answer.
    enum Decision: Equatable {
        /// The answer names the master already known (its epoch is recorded).
        case same
        /// The answer names a new master: switch to it.
        case switchTo(RedisAddress)
        /// Not used: ask the next sentinel (the reason is the locator's last error).
        case stale(String)
    }

    /// The master believed, if any.
    private(set) var master: RedisAddress?
    /// The highest `config-epoch` taken from an answer.
    private(set) var knownEpoch = 0
    /// The master left in the last switch and the epoch it was left at.
    private(set) var left: (address: RedisAddress, epoch: Int)?
    /// Answers not used in a row.
    private(set) var staleInARow = 0

    /// Takes one sentinel's answer: `address` at `epoch`, from a set of `sentinels`.
    mutating func answer(_ address: RedisAddress, epoch: Int, sentinels: Int) -> Decision {
        if staleInARow < sentinels {
            if epoch < knownEpoch {
                staleInARow += 1
                return .stale("a sentinel behind the others (config epoch \(epoch) < \(knownEpoch))")
            }
            if let left, address == left.address, address != master, epoch <= left.epoch {
                staleInARow += 1
                return .stale(
                    "a sentinel still naming \(address), the master replaced at config epoch \(left.epoch) "
                        + "(it answered \(epoch))")
            }
        }
        knownEpoch = epoch
        return believe(address)
    }

    /// Takes a `+switch-master` announcement (final: the switch is done): `address` is the master now.
    mutating func announced(_ address: RedisAddress) -> Decision { believe(address) }

    /// `address` is the master, at `knownEpoch`: the master before it, if another, is left at that epoch.
    private mutating func believe(_ address: RedisAddress) -> Decision {
        staleInARow = 0
        guard address != master else { return .same }
        if let master { left = (master, knownEpoch) }
        master = address
        return .switchTo(address)
    }
}
