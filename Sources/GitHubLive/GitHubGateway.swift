/// GitHubLive: the live GitHub search gateway, its rate limiter, and the cache decorator with its
/// SQLite persistence. Everything here conforms to or wraps `RepositorySearching`.

import Foundation
import GitHubSearch
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The live client of `GET {baseURL}/search/repositories`.
///
/// Uses FoundationNetworking's `URLSession` (certificate verification on, HTTP keep-alive
/// connection reuse, request and resource time-outs); the caller only ever `await`s, so no event
/// loop or caller thread is blocked. Every call goes through the `RateLimiter`. A page past the
/// 1000-result cap is answered empty without calling GitHub. The token is sent as
/// `Authorization: Bearer …` and never appears in an error message or log line.
///
/// Cancellation: a call whose task is cancelled while it waits in the rate limiter's queue leaves it
/// without spending a slot and throws `SearchError.cancelled`; a call already sent is not cancelled.
///
/// Immutable and `Sendable`: call it from any thread or task.
public final class GitHubGateway: ConditionalRepositorySearching {
    /// Where and how to call GitHub.
    public struct Configuration: Sendable {
        /// `https://api.github.com` by default; `http://` is accepted (tests, the simulator).
        public var baseURL: String
        /// Sent as a bearer token when non-nil and non-empty.
        public var token: String?
        /// The `User-Agent` header (GitHub rejects requests without one).
        public var userAgent: String
        /// Seconds without progress before a request fails as `unavailable`.
        public var requestTimeout: Double
        /// Seconds a whole request may take before it fails as `unavailable`.
        public var resourceTimeout: Double
        /// Connections kept per host.
        public var maxConnectionsPerHost: Int
        /// Concurrency, spacing and back-off.
        public var rateLimiter: RateLimiter.Configuration
        /// What a `401`'s message tells the reader to do (the app token's: check `GITHUB_TOKEN`).
        public var unauthorizedHint = "check GITHUB_TOKEN"

        /// Creates a configuration; defaults suit production against api.github.com.
        public init(
            baseURL: String = "https://api.github.com", token: String? = nil, userAgent: String = "bff/1.0",
            requestTimeout: Double = 10, resourceTimeout: Double = 30, maxConnectionsPerHost: Int = 2,
            rateLimiter: RateLimiter.Configuration = RateLimiter.Configuration()
        ) {
            self.baseURL = baseURL
            self.token = token
            self.userAgent = userAgent
            self.requestTimeout = requestTimeout
            self.resourceTimeout = resourceTimeout
            self.maxConnectionsPerHost = maxConnectionsPerHost
            self.rateLimiter = rateLimiter
        }
    }

    /// A base URL that is not `http(s)://host…`.
    public struct InvalidBaseURL: Error, CustomStringConvertible, Sendable {
        /// The rejected value.
        public let value: String
        public var description: String { "GITHUB_API_URL must be an http:// or https:// URL, got '\(value)'" }
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// The limiter every call goes through (exposed for status queries and tests).
    public let rateLimiter: RateLimiter
    let base: String
    let session: URLSession
    /// False when `session` is another gateway's (a person's gateway shares the application's).
    let ownsSession: Bool
    let logger: Logger
    /// Told when GitHub answers `401` (the token is not, or no longer, accepted).
    let onUnauthorized: @Sendable () -> Void

    /// Creates a gateway.
    /// - Parameters:
    ///   - configuration: URL, token, time-outs.
    ///   - clock: wall time for rate-limit resets.
    ///   - logger: receives one debug line per call (never the token).
    ///   - onStatus: receives every change of GitHub's reachability and rate limit.
    ///   - sharedBudget: cluster mode's budget shared by every node (see `RateLimiter`); nil: this
    ///     process's limiter alone.
    ///   - onClientRefusal: told of every call refused because its client spent its share (metrics).
    /// - Throws: `InvalidBaseURL` when the base URL is not http(s).
    public init(
        configuration: Configuration = Configuration(), clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "bff.github"), onStatus: @escaping @Sendable (UpstreamStatus) -> Void = { _ in },
        sharedBudget: (any SharedRateBudget)? = nil, onClientRefusal: @escaping @Sendable () -> Void = {},
        onUnauthorized: @escaping @Sendable () -> Void = {}, sharingConnectionsOf other: GitHubGateway? = nil
    ) throws(InvalidBaseURL) {
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        let lower = base.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), URL(string: base)?.host != nil else {
            throw InvalidBaseURL(value: configuration.baseURL)
        }
        self.base = base
        self.configuration = configuration
        self.logger = logger
        self.onUnauthorized = onUnauthorized
        self.rateLimiter = RateLimiter(
            configuration: configuration.rateLimiter, clock: clock, onStatus: onStatus, shared: sharedBudget,
            onClientRefusal: onClientRefusal)
        if let other {
            session = other.session
            ownsSession = false
            return
        }
        ownsSession = true
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = configuration.requestTimeout
        sessionConfiguration.timeoutIntervalForResource = configuration.resourceTimeout
        sessionConfiguration.httpMaximumConnectionsPerHost = configuration.maxConnectionsPerHost
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfiguration.urlCache = nil
        sessionConfiguration.httpCookieStorage = nil
        // Repository search never redirects; following one would resend `Authorization` to
        // wherever the redirect points (corelibs copies the original request's headers).
        self.session = URLSession(configuration: sessionConfiguration, delegate: RefuseRedirects(), delegateQueue: nil)
    }

    deinit { if ownsSession { session.invalidateAndCancel() } }

    /// Fetches one page from GitHub (always a `.miss`; caching is `SearchCache`'s job).
    public func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
        switch try await fetch(request, ifNoneMatch: nil) {
        case .modified(let page, _): return SearchResponse(page: page, cache: .miss)
        case .notModified: throw SearchError.upstream(message: "GitHub answered 304 to an unconditional request.")
        }
    }

    /// Fetches one page, conditionally on `etag` when given.
    public func fetch(_ request: SearchRequest, ifNoneMatch etag: String?) async throws(SearchError) -> ConditionalFetch
    {
        if request.isPastResultCap {
            let empty = SearchPage(
                totalCount: 0, incompleteResults: false, repositories: [], page: request.page, hasMore: false)
            return .modified(empty, etag: nil)
        }
        let urlRequest = makeURLRequest(request, ifNoneMatch: etag)
        try await rateLimiter.acquire()
        let started = ContinuousClock.now
        // Once sent, the request has spent its budget: it is not cancelled with the caller's task (its
        // answer is still worth caching), so it runs in a task of its own.
        let session = self.session
        let result = await Task { try await session.data(for: urlRequest) }.result
        let elapsed = ContinuousClock.now - started
        // The slot is released only after the answer was observed, so a queued caller cannot slip a
        // request past a 403 or `remaining: 0` that this answer carries.
        let outcome: Result<ConditionalFetch, SearchError>
        switch result {
        case .failure(let error):
            let message = redact(GitHubGateway.unreachableMessage(error, timeout: configuration.requestTimeout))
            logger.warning(
                "github search failed", metadata: ["path": "\(urlRequest.url?.path ?? "")", "error": "\(message)"])
            await rateLimiter.observeUnreachable(message: message)
            outcome = .failure(.unavailable(message: message))
        case .success(let (data, response)):
            if let http = response as? HTTPURLResponse {
                let ms = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
                logger.debug(
                    "github search",
                    metadata: ["status": "\(http.statusCode)", "page": "\(request.page)", "ms": "\(ms)"])
                do {
                    outcome = .success(
                        try await interpret(
                            status: http.statusCode, headers: GitHubGateway.lowercasedHeaders(http), data: data,
                            request: request))
                } catch {
                    outcome = .failure(error)
                }
            } else {
                outcome = .failure(.upstream(message: "GitHub answered with something other than HTTP."))
            }
        }
        await rateLimiter.reportShared()
        await rateLimiter.release()
        return try outcome.get()
    }

    func interpret(status: Int, headers: [String: String], data: Data, request: SearchRequest) async throws(SearchError)
        -> ConditionalFetch
    {
        let errorBody = status >= 400 ? try? JSONDecoder().decode(GitHubWire.ErrorBody.self, from: data) : nil
        let mentionsLimit = errorBody?.message?.lowercased().contains("rate limit") ?? false
        if let limited = await rateLimiter.observe(
            status: status, headers: headers, bodyMentionsRateLimit: mentionsLimit)
        {
            throw limited
        }
        switch status {
        case 200:
            do {
                let link = headers["link"].map(LinkHeader.init)
                let page = try GitHubWire.decodePage(data, request: request, link: link)
                return .modified(page, etag: headers["etag"])
            } catch {
                let message = "GitHub sent a search result that could not be read."
                logger.warning(
                    "github search body undecodable", metadata: ["error": "\(redact(String(describing: error)))"])
                await rateLimiter.observeUnreachable(message: message)
                throw SearchError.upstream(message: message)
            }
        case 304:
            return .notModified
        case 422:
            let message = errorBody?.humanMessage ?? "GitHub rejected the query."
            throw SearchError.invalidQuery(message: redact(message))
        case 401:
            onUnauthorized()
            throw SearchError.upstream(
                message: "GitHub rejected the credentials (HTTP 401); \(configuration.unauthorizedHint).")
        default:
            let detail = errorBody?.message.map { ": \(redact($0))" } ?? ""
            throw SearchError.upstream(message: "GitHub answered HTTP \(status)\(detail).")
        }
    }

    func makeURLRequest(_ request: SearchRequest, ifNoneMatch etag: String?) -> URLRequest {
        var items: [(String, String)] = [("q", request.query)]
        if request.sort != .bestMatch {
            items.append(("sort", request.sort.rawValue))
            items.append(("order", request.order.rawValue))
        }
        items.append(("per_page", String(min(max(1, request.perPage), SearchRequest.maximumPageSize))))
        items.append(("page", String(max(1, request.page))))
        let query = items.map { "\($0.0)=\(GitHubGateway.percentEncode($0.1))" }.joined(separator: "&")
        var urlRequest = URLRequest(url: URL(string: "\(base)/search/repositories?\(query)")!)
        urlRequest.httpMethod = "GET"
        urlRequest.setValue("application/vnd.github+json", forHTTPHeaderField: "Accept")
        urlRequest.setValue("2022-11-28", forHTTPHeaderField: "X-GitHub-Api-Version")
        urlRequest.setValue(configuration.userAgent, forHTTPHeaderField: "User-Agent")
        if let token = configuration.token, !token.isEmpty {
            urlRequest.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        if let etag { urlRequest.setValue(etag, forHTTPHeaderField: "If-None-Match") }
        return urlRequest
    }

    /// Removes the token from any text that might reach a log or a user.
    func redact(_ text: String) -> String {
        guard let token = configuration.token, !token.isEmpty else { return text }
        return text.replacingOccurrences(of: token, with: "[redacted]")
    }
}

/// A session delegate that refuses every redirect, so the bearer token never travels to another
/// URL; the search fails (`upstream`, or `unavailable` when corelibs reports it as a transport error).
final class RefuseRedirects: NSObject, URLSessionTaskDelegate, Sendable {  // no state
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
