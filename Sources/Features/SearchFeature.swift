import GitHubSearch
import JSON
import ViewModels

/// The `search` view model's logic: GitHub repository search with paging, refresh, sort and selection.
///
/// Generic over the search client so calls dispatch statically. A pure value; run it with
/// `SearchViewModel` (a `Store`), on that store's owner.
///
/// Rules beyond the contract:
/// - `refresh` re-runs the search shown (the last submitted query and the current sort), page 1 only,
///   with `CachePolicy.revalidate`; it is a no-op before the first search and supersedes a request
///   under way.
/// - A sort change re-runs the search shown (page 1); before the first search it only sets the sort.
/// - `select` with an id not in `repositories` emits nothing (a click that raced a new result list is
///   not malformed input, so it is not a 400).
/// - A failed first page clears the results; a failed next page keeps them and `hasMore`, so
///   `loadMore` can retry. Starting any request clears `error`.
/// - Old results stay visible while a new search loads; they are replaced when it answers.
/// - `stale` is true when any page shown came from stale cache.
/// - Every search or page request is one cancellable effect (`searchEffect`): starting a newer one
///   (submit, sort change, refresh) cancels the one under way, so a superseded request that is still
///   waiting for GitHub's rate budget leaves the queue instead of spending a call; the store cancels it
///   when the session ends.
/// - A `rateLimited` failure sets `retryAt` (when it finished plus `retryAfterSeconds`, rounded up to
///   a whole second) and starts a timer effect that clears it at that time; meanwhile `submit` and
///   `loadMore` are no-ops (`searchEnabled`, `loadMoreEnabled` are false). Sort changes and `refresh`
///   still run: the cache may answer them without GitHub.
public struct SearchFeature<Searcher: RepositorySearching>: ViewModelFeature {
    /// The search client (live gateway, cache, or a test fake).
    public let searcher: Searcher
    /// Results per page, 1...100.
    public let perPage: Int
    /// The time effects read and wait for.
    public var clock: any SearchClock { clockBox.clock }
    /// The clock out of line: the feature is stored in every session's `search` store, and the
    /// existential is large inline; every feature on the system clock shares one box.
    private let clockBox: SearchClockBox
    /// True in a signed-in session: its searches spend the person's own budget, so it follows
    /// `PersonalUpstreamStatus` and not the application's `UpstreamStatus`.
    public let ownBudget: Bool

    /// The id of the search effect: a new search cancels the one in flight.
    public static var searchEffect: EffectID { "search" }
    /// The id of the rate-limit timer.
    public static var rateLimitTimer: EffectID { "rateLimitTimer" }

    /// A feature searching with `searcher`, `perPage` results per page (clamped to 1...100), reading
    /// time from `clock`.
    /// `ownBudget`: the searches spend a signed-in person's budget (see the property).
    public init(
        searcher: Searcher, perPage: Int = 30, clock: any SearchClock = SystemSearchClock(), ownBudget: Bool = false
    ) {
        self.searcher = searcher
        self.ownBudget = ownBudget
        self.perPage = min(max(perPage, 1), SearchRequest.maximumPageSize)
        clockBox = clock is SystemSearchClock ? .system : SearchClockBox(clock)
    }

    /// The search state.
    public typealias State = SearchState
    /// The search actions.
    public typealias Action = SearchAction

    /// The contract name.
    public var name: String { "search" }
    /// The input names, in the contract's order.
    public var inputNames: [String] { ["query", "sort", "submit", "loadMore", "refresh", "select"] }

    /// Parses a named input into an action (see `ViewModelFeature`).
    public func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
        let v = InputValue(viewModel: name, input: input, value: value)
        switch input {
        case "query": return .queryChanged(try v.string())
        case "sort": return .sortChanged(try v.oneOf(SearchSort.self))
        case "submit":
            try v.none()
            return .submitTapped
        case "loadMore":
            try v.none()
            return .loadMoreTapped
        case "refresh":
            try v.none()
            return .refreshTapped
        case "select": return .rowSelected(id: try v.integer("an integer repository id"))
        default: throw unknownInput(input)
        }
    }

    /// The transition (see `ViewModelFeature`).
    public func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>] {
        switch action {
        case .queryChanged(let query):
            state.query = query
            return []
        case .sortChanged(let sort):
            guard sort != state.sort else { return [] }
            state.sort = sort
            guard var request = state.current else { return [] }
            request.sort = sort
            return start(request, policy: .useCache, in: &state)
        case .submitTapped:
            guard state.searchEnabled else { return [] }
            let request = SearchRequest(query: trimmed(state.query), sort: state.sort, page: 1, perPage: perPage)
            return start(request, policy: .useCache, in: &state)
        case .loadMoreTapped:
            guard state.loadMoreEnabled, var request = state.current else { return [] }
            request.page = state.loadedPage + 1
            guard !request.isPastResultCap else { return [] }
            return start(request, policy: .useCache, in: &state)
        case .refreshTapped:
            guard let request = state.current else { return [] }
            return start(request, policy: .revalidate, in: &state)
        case .rowSelected(let id):
            guard let repository = state.repositories.first(where: { $0.id == id }) else { return [] }
            return [.signal("openURL", .string(repository.htmlURL)), .signal("deselect", .int(id))]
        case .searchResponse(let generation, let request, let result, let receivedAt):
            guard generation == state.generation, state.isLoading else { return [] }
            receive(result, for: request, in: &state)
            guard case .failure(.rateLimited(let seconds, _)) = result else { return [] }
            return block(until: Int((receivedAt + Double(seconds)).rounded(.up)), in: &state)
        case .rateLimitEnded(let retryAt):
            guard retryAt == state.retryAt else { return [] }
            state.retryAt = nil
            return []
        case .upstreamBlocked(let until, let receivedAt):
            guard let until, Double(until) > receivedAt else {
                // The app searches again: a countdown still running here has no reason left.
                guard state.retryAt != nil else { return [] }
                state.retryAt = nil
                return [.cancel(id: Self.rateLimitTimer)]
            }
            return block(until: until, in: &state)
        }
    }

    /// Searching is refused until `retryAt` (a rate limit): the countdown and its timer, unless already set.
    private func block(until retryAt: Int, in state: inout State) -> [Effect<Action>] {
        guard retryAt != state.retryAt else { return [] }
        state.retryAt = retryAt
        return [rateLimitTimer(until: retryAt)]
    }

    /// The block of the budget this session spends (the application's `UpstreamStatus`, or a signed-in
    /// person's `PersonalUpstreamStatus`), as an action stamped with the clock's time.
    public func action(for notice: any Sendable) -> SearchAction? {
        let status: UpstreamStatus
        if ownBudget {
            guard let personal = notice as? PersonalUpstreamStatus else { return nil }
            status = personal.status
        } else {
            guard let shared = notice as? UpstreamStatus else { return nil }
            status = shared
        }
        return .upstreamBlocked(until: status.blockedUntil, receivedAt: clock.now())
    }

    /// After a restore: the request that was under way is issued again (under a new generation) and
    /// the rate-limit timer is armed again; nothing else was running.
    public func resume(_ state: inout State) -> [Effect<Action>] {
        var effects: [Effect<Action>] = []
        if state.isLoading {
            if let inFlight = state.inFlight {
                effects += start(inFlight.request, policy: inFlight.policy, in: &state)
            } else {
                state.isLoading = false  // nothing to wait for: never stay loading forever
            }
        }
        if let retryAt = state.retryAt { effects.append(rateLimitTimer(until: retryAt)) }
        return effects
    }

    /// The timer that clears `retryAt` when it is reached.
    private func rateLimitTimer(until retryAt: Int) -> Effect<Action> {
        let clock = self.clock
        return Effect.run {
            await clock.sleep(until: Double(retryAt))
            return .rateLimitEnded(retryAt: retryAt)
        }
        .cancellable(id: Self.rateLimitTimer, cancelInFlight: true)
    }

    /// Starts `request` as the newest generation; page 1 becomes the search shown.
    private func start(_ request: SearchRequest, policy: CachePolicy, in state: inout State) -> [Effect<Action>] {
        state.generation += 1
        state.isLoading = true
        state.inFlight = SearchInFlight(request: request, policy: policy)
        state.error = nil
        if request.page == 1 { state.current = request }
        let generation = state.generation
        let searcher = self.searcher
        let clock = self.clock
        return [
            Effect.run {
                let result: Result<SearchResponse, SearchError>
                do throws(SearchError) {
                    result = .success(try await searcher.search(request, policy: policy))
                } catch {
                    result = .failure(error)
                }
                return .searchResponse(generation: generation, request: request, result, receivedAt: clock.now())
            }
            .cancellable(id: Self.searchEffect, cancelInFlight: true)
        ]
    }

    private func receive(
        _ result: Result<SearchResponse, SearchError>, for request: SearchRequest, in state: inout State
    ) {
        state.isLoading = false
        state.inFlight = nil
        switch result {
        case .success(let response):
            let page = response.page
            if request.page == 1 {
                state.repositories = []
                state.stale = response.isStale
            } else {
                state.stale = state.stale || response.isStale
            }
            var seen = Set(state.repositories.map(\.id))
            for repository in page.repositories where seen.insert(repository.id).inserted {
                state.repositories.append(repository)
            }
            state.totalCount = page.totalCount
            state.loadedPage = request.page
            state.hasMore = page.hasMore && !request.nextPage.isPastResultCap
        case .failure(let error):
            state.error = error
            if request.page == 1 {
                state.repositories = []
                state.totalCount = nil
                state.hasMore = false
                state.stale = false
                state.loadedPage = 0
            }
        }
    }

    private func trimmed(_ text: String) -> String {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
            let last = text.lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(text[first...last])
    }
}

/// A search clock behind one reference (see `SearchFeature.clock`). Immutable; any thread.
final class SearchClockBox: Sendable {
    let clock: any SearchClock
    /// The box every feature on `SystemSearchClock` shares.
    static let system = SearchClockBox(SystemSearchClock())

    init(_ clock: any SearchClock) {
        self.clock = clock
    }
}
