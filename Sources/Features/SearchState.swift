import GitHubSearch
import ViewModels

/// The `search` view model's state (top level rather than nested, so it is not generic over the
/// search client).
///
/// Durable: every field but `generation` is stored (see `CodingKeys`). `generation` only tells the
/// answers of requests under way apart, and no request survives a restore (the restored view model
/// issues `inFlight` again under a new generation), so it restarts at 0. `retryAt` is stored (wall-clock
/// seconds, meaningful on any node); its timer is not, and a restore arms it again.
///
/// Memory: one `search` state lives in every session, and many sessions never search. The fields that
/// stay nil until a search (the search shown) or are set only for a while (the error, the rate-limit
/// time, the request under way): most of the state's size inline, live out of line in one copy-on-write box that
/// exists only while one of them is set; the rest is ordered so that the bytes pack without padding.
///
/// Threading: a value; the box is never changed while shared, so copies may go to any thread.
public struct SearchState: Equatable, Sendable, Codable {
    /// The query text as typed (the `query` output).
    public var query: String
    /// The results shown; ids are unique.
    public var repositories: [Repository]
    /// The last page of `current` that was loaded (0 for none).
    public var loadedPage: Int
    /// The number of the latest search or page started; a response carrying another number is from a
    /// superseded request and is ignored.
    public var generation: Int = 0
    /// The rarely set fields; nil while all of them are nil (see `OutOfLine`).
    private var outOfLine: OutOfLine?
    /// GitHub's total match count of the search shown; nil until a search answered (and after a
    /// first page failed).
    public var totalCount: Int?
    /// The chosen order (the `sort` output).
    public var sort: SearchSort
    /// True while a search or a next page is being fetched.
    public var isLoading: Bool
    /// True when `loadMore` can fetch another page.
    public var hasMore: Bool
    /// True when (some of) the results come from cache past its freshness.
    public var stale: Bool

    /// The last failure, until the next search or page starts.
    public var error: SearchError? {
        get { outOfLine?.error }
        set { updateOutOfLine { $0.error = newValue } }
    }
    /// The first-page request of the search shown or under way; nil before the first search. `refresh`,
    /// `loadMore` and sort changes work on it, not on the text being edited.
    public var current: SearchRequest? {
        get { outOfLine?.current }
        set { updateOutOfLine { $0.current = newValue } }
    }
    /// While rate limited: the time (seconds since 1970, whole seconds) at which searching is possible
    /// again; nil otherwise. Set by a `rateLimited` failure, cleared by the timer effect at that time.
    public var retryAt: Int? {
        get { outOfLine?.retryAt }
        set { updateOutOfLine { $0.retryAt = newValue } }
    }
    /// The request under way while `isLoading`, with its cache policy; nil otherwise.
    public var inFlight: SearchInFlight? {
        get { outOfLine?.inFlight }
        set { updateOutOfLine { $0.inFlight = newValue } }
    }

    /// The out-of-line fields, immutable: a state copied (the store keeps the old state while it diffs
    /// outputs) shares the box, and a change makes a new one. These fields change a few times per
    /// search, so a box per change costs nothing that matters, and an immutable box is `Sendable` as
    /// it stands.
    private final class OutOfLine: Equatable, Sendable {
        let fields: OutOfLineFields

        init(_ fields: OutOfLineFields) { self.fields = fields }

        var error: SearchError? { fields.error }
        var current: SearchRequest? { fields.current }
        var retryAt: Int? { fields.retryAt }
        var inFlight: SearchInFlight? { fields.inFlight }

        static func == (a: OutOfLine, b: OutOfLine) -> Bool { a === b || a.fields == b.fields }
    }

    /// What `OutOfLine` holds.
    private struct OutOfLineFields: Equatable, Sendable {
        var error: SearchError?
        var current: SearchRequest?
        var retryAt: Int?
        var inFlight: SearchInFlight?

        var isEmpty: Bool { error == nil && current == nil && retryAt == nil && inFlight == nil }
    }

    /// Changes the out-of-line fields: a box with the change replaces the old one (none when the last
    /// of them is cleared).
    private mutating func updateOutOfLine(_ change: (inout OutOfLineFields) -> Void) {
        var fields = outOfLine?.fields ?? OutOfLineFields()
        change(&fields)
        outOfLine = fields.isEmpty ? nil : OutOfLine(fields)
    }

    /// The stored names: explicit so a rename cannot change what was written before. `generation` is
    /// transient (not stored).
    enum CodingKeys: String, CodingKey {
        case query, sort, isLoading, repositories, totalCount, hasMore, error, stale, current, loadedPage, retryAt
        case inFlight
    }

    /// The initial state: empty query, best match, nothing loaded.
    public init(query: String = "", sort: SearchSort = .bestMatch) {
        self.query = query
        self.sort = sort
        isLoading = false
        repositories = []
        totalCount = nil
        hasMore = false
        stale = false
        loadedPage = 0
        outOfLine = nil
    }

    /// Reads the stored form (what the synthesized conformance read when every field was inline).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        query = try c.decode(String.self, forKey: .query)
        sort = try c.decode(SearchSort.self, forKey: .sort)
        isLoading = try c.decode(Bool.self, forKey: .isLoading)
        repositories = try c.decode([Repository].self, forKey: .repositories)
        totalCount = try c.decodeIfPresent(Int.self, forKey: .totalCount)
        hasMore = try c.decode(Bool.self, forKey: .hasMore)
        stale = try c.decode(Bool.self, forKey: .stale)
        loadedPage = try c.decode(Int.self, forKey: .loadedPage)
        outOfLine = nil
        error = try c.decodeIfPresent(SearchError.self, forKey: .error)
        current = try c.decodeIfPresent(SearchRequest.self, forKey: .current)
        retryAt = try c.decodeIfPresent(Int.self, forKey: .retryAt)
        inFlight = try c.decodeIfPresent(SearchInFlight.self, forKey: .inFlight)
    }

    /// Writes the stored form: the keys in `CodingKeys` order, nil fields left out (as the synthesized
    /// conformance did).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(query, forKey: .query)
        try c.encode(sort, forKey: .sort)
        try c.encode(isLoading, forKey: .isLoading)
        try c.encode(repositories, forKey: .repositories)
        try c.encodeIfPresent(totalCount, forKey: .totalCount)
        try c.encode(hasMore, forKey: .hasMore)
        try c.encodeIfPresent(error, forKey: .error)
        try c.encode(stale, forKey: .stale)
        try c.encodeIfPresent(current, forKey: .current)
        try c.encode(loadedPage, forKey: .loadedPage)
        try c.encodeIfPresent(retryAt, forKey: .retryAt)
        try c.encodeIfPresent(inFlight, forKey: .inFlight)
    }

    /// Submitting is possible when the query is not blank, nothing is loading and no rate limit is in force.
    public var searchEnabled: Bool { !isLoading && retryAt == nil && !query.allSatisfy(\.isWhitespace) }

    /// Loading the next page is possible when there is one, nothing is loading and no rate limit is in force.
    public var loadMoreEnabled: Bool { hasMore && !isLoading && retryAt == nil }

    /// The sentence the search area shows for `error`: nil without an error, and nil for a rate limit
    /// (it is app-wide, so the shared `status` view model's `message` banner says it, once).
    public var errorMessage: String? {
        guard let error else { return nil }
        if case .rateLimited = error { return nil }
        return error.message
    }
}
