/// Who asked last, for a fair share that binds only while others ask (GitHub's budget: docs/API.md,
/// "Fair use"): the latest asker and the latest ask of any client other than it. That is enough to tell
/// every client when someone else last asked, in constant memory whatever the number of clients (a flood
/// of rotating addresses holds two entries). The Redis budget's script keeps the same two entries in a
/// hash (`BudgetScripts.take`).
///
/// A value; whoever holds it says which thread touches it.
public struct RecentAskers: Sendable, Equatable {
    /// One client's ask.
    public struct Ask: Sendable, Equatable {
        public var key: String
        /// When (any unit of time, the same as the horizon's).
        public var at: Double
    }

    /// The latest ask.
    public private(set) var latest: Ask?
    /// The latest ask of a client other than `latest`'s.
    public private(set) var latestOfOthers: Ask?

    /// Nobody has asked.
    public init() {}

    /// Records that `key` asked at `time`.
    public mutating func record(_ key: String, at time: Double) {
        if latest?.key != key { latestOfOthers = latest }
        latest = Ask(key: key, at: time)
    }

    /// When a client other than `key` last asked (nil: none has).
    public func lastAsk(ofOthersThan key: String) -> Double? {
        latest?.key == key ? latestOfOthers?.at : latest?.at
    }

    /// Until when `key` shares the budget: another client's last ask plus `horizon`, if that is still after
    /// `now`; nil when nobody else asked within `horizon` (`key` is alone and may use the whole budget).
    public func contended(for key: String, now: Double, horizon: Double) -> Double? {
        guard let other = lastAsk(ofOthersThan: key), other + horizon > now else { return nil }
        return other + horizon
    }
}
