import JSON

/// What a user got from one search, as the event stream showed it.
package enum SearchOutcome: String, CaseIterable, Sendable {
    /// Results not marked stale, for a key (query, sort, page) that had not shown results before
    /// in this run: fetched from GitHub (inferred: the stream does not say where results came from).
    case fresh
    /// Results not marked stale, for a key that had already shown results in this run: served
    /// from the cache (inferred as above; includes stale-while-revalidate serves, which the view
    /// model does not mark).
    case cached
    /// Results with `stale: true` (cache past its freshness because GitHub could not give better).
    case stale
    /// No results: `error.kind == "rateLimited"`.
    case rateLimited
    /// No results: any other error (or no answer at all: POST errors and time-outs are counted here
    /// by the scenario).
    case failed

    /// True when the user saw results (fresh, cached or stale-marked).
    package var showedResults: Bool {
        switch self {
        case .fresh, .cached, .stale: return true
        case .rateLimited, .failed: return false
        }
    }
}

/// The `search` view model's outputs a load client needs, merged from a stream's events
/// (events carry only the outputs that changed, so `stale` or `error` may be absent from the
/// event that ends a search and must be remembered).
///
/// A value; owned by one simulated user.
package struct SearchStreamState: Sendable, Equatable {
    /// `isLoading` as last seen.
    package var isLoading = false
    /// `stale` as last seen.
    package var stale = false
    /// `error.kind` as last seen (nil for `error: null`).
    package var errorKind: String?
    /// `hasMore` as last seen.
    package var hasMore = false
    /// `retryAt` as last seen: non-nil while the session is rate limited. The view model then keeps
    /// `searchEnabled` and `loadMoreEnabled` false and ignores `submit`, `loadMore` and the search a
    /// sort change would start (no event follows them), as a user sees a disabled button.
    package var retryAt: String?

    /// True while the view model refuses to search (a rate limit is in force).
    package var isRateLimited: Bool { retryAt != nil }

    /// The initial state (the view model's own initial outputs).
    package init() {}

    /// Merges the outputs of one event (`{"inputSeq":…,"outputs":{…}}`) or of a snapshot's
    /// `viewModels.search` object. Returns true when these outputs end a search: `isLoading` became
    /// false, or results or an error arrived while not loading.
    @discardableResult
    package mutating func apply(outputs: JSONObject) -> Bool {
        var ended = false
        if let loading = outputs["isLoading"]?.boolValue {
            if !loading { ended = true }
            isLoading = loading
        }
        if let stale = outputs["stale"]?.boolValue { self.stale = stale }
        if let hasMore = outputs["hasMore"]?.boolValue { self.hasMore = hasMore }
        if let retryAt = outputs["retryAt"] { self.retryAt = retryAt.stringValue }
        if let error = outputs["error"] {
            errorKind = error.isNull ? nil : (error["kind"]?.stringValue ?? "unknown")
            if !error.isNull && !isLoading { ended = true }
        }
        if outputs["repositories"] != nil && !isLoading { ended = true }
        return ended
    }

    /// Merges one `search` event's data; returns whether it ended a search (false for data that is
    /// not JSON or has no `outputs`).
    @discardableResult
    package mutating func apply(eventData: String) -> Bool {
        guard let value = try? JSONValue.parse(eventData), let outputs = value["outputs"]?.objectValue else {
            return false
        }
        return apply(outputs: outputs)
    }

    /// The outcome of the search that just ended, given whether its key had shown results before.
    package func outcome(keySeenBefore: Bool) -> SearchOutcome {
        if let errorKind { return errorKind == "rateLimited" ? .rateLimited : .failed }
        if stale { return .stale }
        return keySeenBefore ? .cached : .fresh
    }
}

/// Counts of search outcomes, and the figures derived from them.
package struct SearchOutcomeCounts: Sendable, Equatable {
    /// Searches per outcome.
    package private(set) var counts: [SearchOutcome: Int] = [:]

    /// No searches yet.
    package init() {}

    /// Counts one search.
    package mutating func record(_ outcome: SearchOutcome) { counts[outcome, default: 0] += 1 }

    /// Searches with `outcome`.
    package subscript(outcome: SearchOutcome) -> Int { counts[outcome] ?? 0 }

    /// Every search counted.
    package var total: Int { counts.values.reduce(0, +) }

    /// Searches that showed results (fresh, cached or stale-marked).
    package var showedResults: Int { counts.reduce(0) { $0 + ($1.key.showedResults ? $1.value : 0) } }

    /// The share of searches that showed results (1 when there were none).
    package var successRate: Double { total == 0 ? 1 : Double(showedResults) / Double(total) }

    /// Searches that showed results per upstream request (0 without upstream requests).
    package func showedResultsPerUpstreamRequest(_ upstream: Int) -> Double {
        upstream > 0 ? Double(showedResults) / Double(upstream) : 0
    }
}
