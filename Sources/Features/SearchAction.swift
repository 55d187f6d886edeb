import GitHubSearch
import ViewModels

/// The `search` view model's actions: the session's inputs, named after events, and the search
/// effect's result.
public enum SearchAction: Sendable, Equatable {
    /// `query`: the text changed.
    case queryChanged(String)
    /// `sort`: the order changed.
    case sortChanged(SearchSort)
    /// `submit`: the search button was pressed.
    case submitTapped
    /// `loadMore`: the end of the list was reached.
    case loadMoreTapped
    /// `refresh`: pull-to-refresh.
    case refreshTapped
    /// `select`: a row was tapped.
    case rowSelected(id: Int)
    /// The search effect finished: the generation it was started with, the request, its outcome, and
    /// when it finished (the clock's time, seconds since 1970; a rate limit counts from it).
    case searchResponse(
        generation: Int, request: SearchRequest, Result<SearchResponse, SearchError>, receivedAt: Double)
    /// The rate-limit timer reached `retryAt` (the value it was started for).
    case rateLimitEnded(retryAt: Int)
    /// The app-wide upstream status says searches are refused until `blockedUntil` (nil: not blocked),
    /// as seen at `receivedAt` (the clock's time, seconds since 1970). Every session follows it, so a
    /// session that has not searched yet does not offer a search the app would refuse.
    case upstreamBlocked(until: Int?, receivedAt: Double)
}
