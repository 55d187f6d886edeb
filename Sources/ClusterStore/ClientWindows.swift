/// The per-client fixed windows of `InMemoryUpstreamBudget` (the Redis counter keys' twin): calls each
/// client started in its window and when the window ends. Ended windows are swept when the table
/// reaches twice the size it had after the last sweep (amortized O(1); bounded by the clients of one
/// window, like the Redis keys that expire).
///
/// Threading: a value; touched only under `InMemoryUpstreamBudget`'s lock.
struct ClientWindows {
    struct Window {
        var calls: Int
        var end: Double
    }

    private(set) var windows: [String: Window] = [:]
    private var sweepAt = 64

    /// When `client` has started its cap of calls in a window still open: the window's end, else nil.
    func endIfAtCap(_ client: BudgetClient, now: Double) -> Double? {
        guard let w = windows[client.key], w.end > now, w.calls >= client.cap else { return nil }
        return w.end
    }

    /// Counts one call of `client`, opening a window of `client.windowSeconds` when it has none open.
    mutating func count(_ client: BudgetClient, now: Double) {
        if windows.count >= sweepAt {
            windows = windows.filter { $0.value.end > now }
            sweepAt = max(64, 2 * windows.count)
        }
        if let w = windows[client.key], w.end > now {
            windows[client.key] = Window(calls: w.calls + 1, end: w.end)
        } else {
            windows[client.key] = Window(calls: 1, end: now + client.windowSeconds)
        }
    }
}
