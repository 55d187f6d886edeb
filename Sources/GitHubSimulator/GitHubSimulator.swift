/// GitHubSimulator: a local stand-in for GitHub's `GET /search/repositories` and its "Sign in with
/// GitHub" web flow (`SimOAuth`), for tests, the offline demo and benchmarks. A deterministic corpus,
/// GitHub's query syntax and paging, a real per-minute rate budget (one per signed-in token, one
/// shared by the rest), and fault switches; the core answers requests without sockets (`handle`), and
/// `install(on:)` mounts it on an EventHTTP router.

import Foundation
import JSON
import Primitives

/// The simulator: corpus, rate budget, fault switches and counters.
///
/// `handle` is deterministic given the state and `now`. Thread-safe: the mutable state (faults,
/// budget window, stats) is guarded by one `Lock` held only for bookkeeping, never during search.
package final class GitHubSimulator: Sendable {
    /// How to build the simulator.
    package struct Configuration: Sendable {
        /// PRNG seed of the corpus.
        package var seed: UInt64 = 42
        /// Number of repositories in the corpus.
        package var repositories = 5000
        /// Search requests allowed per minute (GitHub: 30 with a token, 10 without).
        package var rateLimit = 30
        /// When set, an `Authorization` header other than `Bearer <token>` gets GitHub's 401.
        package var token: String?
        /// Fault switches at start.
        package var faults = SimFaults()
        /// The one OAuth app the sign-in flow knows (`SimOAuth`).
        package var oauthClientID = "sim-client-id"
        package var oauthClientSecret = "sim-client-secret"
        /// Creates the default configuration.
        package init() {}
    }

    /// Counters for tests and benchmarks (`GET /_sim/stats`).
    package struct Stats: Sendable, Equatable {
        /// Search requests received (including refused ones).
        package var requests = 0
        /// Searches answered 200 (including malformed ones).
        package var served = 0
        /// Searches refused for the rate budget or a rate-limit fault.
        package var rateLimited = 0
        /// Searches that carried the configured bearer token.
        package var authenticated = 0
        /// Conditional searches answered 304 (free of budget, as on GitHub).
        package var notModified = 0
        /// Searches that carried a token the sign-in flow issued (each spends that token's budget).
        package var signedIn = 0
        /// All zero.
        package init() {}
    }

    /// The corpus searched.
    package let corpus: Corpus
    let token: String?
    /// The sign-in flow's codes and tokens.
    let oauth: SimOAuth
    /// The switches, the budget window and the counters.
    private struct State {
        var faultState: SimFaults
        var limit: Int
        var windowReset = 0.0
        var used = 0
        /// The budget windows of tokens the sign-in flow issued (at most `SimOAuth.maxTokens`).
        var tokenWindows: [String: (reset: Double, used: Int)] = [:]
        var counters = Stats()
    }
    private let state: Lock<State>
    /// The configured switches and budget, restored by `reset()`.
    private let initialFaults: SimFaults
    private let initialLimit: Int

    /// Generates the corpus (quick enough for every test to make its own) and sets the switches.
    package init(configuration: Configuration = Configuration()) {
        corpus = Corpus(seed: configuration.seed, count: configuration.repositories)
        token = configuration.token
        oauth = SimOAuth(clientID: configuration.oauthClientID, clientSecret: configuration.oauthClientSecret)
        initialFaults = configuration.faults
        initialLimit = max(0, configuration.rateLimit)
        state = Lock(State(faultState: configuration.faults, limit: max(0, configuration.rateLimit)))
    }

    /// The current fault switches.
    package var faults: SimFaults {
        get { state.withLock { $0.faultState } }
        set { state.withLock { $0.faultState = newValue } }
    }

    /// The per-minute budget.
    package var rateLimit: Int {
        get { state.withLock { $0.limit } }
        set { state.withLock { $0.limit = max(0, newValue) } }
    }

    /// The counters so far.
    package var stats: Stats { state.withLock { $0.counters } }

    /// The sign-in counters (`authorized`, `denied`, `tokensIssued`, `tokensRevoked`, `tokensLive`,
    /// `refusedExchanges`), as `GET /_sim/stats` shows them under `oauth`.
    package var signInStats: JSONValue { oauth.statsJSON }

    /// Every live token the sign-in flow issued (tests look for them where they must not be).
    package var issuedTokens: [String] { oauth.state.withLock { Array($0.tokens.entries.keys) } }

    /// Clears counters and the budget window, and restores the switches and budget it started with.
    package func reset() {
        state.withLock {
            $0 = State(faultState: initialFaults, limit: initialLimit)
        }
    }

    /// Answers one request. `now` is wall time in seconds since 1970.
    package func handle(_ request: SimRequest, now: Double) -> SimOutcome {
        switch (request.method, request.path) {
        case ("GET", "/search/repositories"): return search(request, now: now)
        case ("GET", "/_sim/stats"): return .respond(.json(200, statsJSON), delayMilliseconds: 0)
        case ("GET", "/_sim/faults"): return .respond(.json(200, faults.json), delayMilliseconds: 0)
        case ("POST", "/_sim/faults"): return .respond(setFaults(request.body), delayMilliseconds: 0)
        case ("POST", "/_sim/reset"):
            reset()
            return .respond(SimResponse(status: 204), delayMilliseconds: 0)
        case ("GET", "/login/oauth/authorize"): return .respond(oauth.authorizePage(request), delayMilliseconds: 0)
        case ("POST", "/login/oauth/authorize"):
            return .respond(oauth.authorize(request, now: now), delayMilliseconds: 0)
        case ("POST", "/login/oauth/access_token"):
            return .respond(oauth.exchange(request, now: now), delayMilliseconds: 0)
        case ("GET", "/user"): return .respond(oauth.user(request), delayMilliseconds: faults.latencyMs)
        case ("DELETE", let path) where path.hasPrefix("/applications/") && path.hasSuffix("/token"):
            let clientID = String(path.dropFirst("/applications/".count).dropLast("/token".count))
            return .respond(oauth.revoke(request, clientIDInPath: clientID), delayMilliseconds: 0)
        case (_, "/search/repositories"), (_, "/_sim/stats"), (_, "/_sim/faults"), (_, "/_sim/reset"),
            (_, "/login/oauth/authorize"), (_, "/login/oauth/access_token"), (_, "/user"):
            return .respond(.json(405, ["message": "Method Not Allowed"]), delayMilliseconds: 0)
        default:
            return .respond(
                .json(404, ["message": "Not Found", "documentation_url": "https://docs.github.com/rest"]),
                delayMilliseconds: 0)
        }
    }

    /// Updates the counters under the lock.
    func record(_ change: (inout Stats) -> Void) { state.withLock { change(&$0.counters) } }

    /// Spends one unit of the budget: the shared one, or with `token` (one the sign-in flow issued) that
    /// token's own. Returns the limit, what remains, the reset time (epoch seconds) and whether the
    /// request may proceed; `forced` refuses as if the budget were spent.
    func consume(now: Double, forced: Bool, token: String? = nil) -> (
        limit: Int, remaining: Int, reset: Int, allowed: Bool
    ) {
        state.withLock { s in
            var (reset, used) = token.flatMap { s.tokenWindows[$0] } ?? (s.windowReset, s.used)
            if now >= reset {
                reset = (now + 60).rounded(.up)
                used = 0
            }
            let allowed = !forced && used < s.limit
            if allowed { used += 1 }
            if let token {
                if s.tokenWindows.count >= SimOAuth.maxTokens {
                    s.tokenWindows = s.tokenWindows.filter { $0.value.reset > now }
                }
                s.tokenWindows[token] = (reset, used)
            } else {
                (s.windowReset, s.used) = (reset, used)
            }
            return (s.limit, allowed ? s.limit - used : 0, Int(reset), allowed)
        }
    }

    /// Gives back one unit of the budget it was taken from (a 304 is free).
    func refund(token: String? = nil) {
        state.withLock { s in
            if let token, let w = s.tokenWindows[token] {
                s.tokenWindows[token] = (w.reset, max(0, w.used - 1))
            } else if token == nil {
                s.used = max(0, s.used - 1)
            }
        }
    }

    var statsJSON: JSONValue {
        let s = stats
        return [
            "requests": .int(s.requests), "served": .int(s.served), "rateLimited": .int(s.rateLimited),
            "authenticated": .int(s.authenticated), "notModified": .int(s.notModified), "signedIn": .int(s.signedIn),
            "oauth": oauth.statsJSON,
        ]
    }

    func setFaults(_ body: [UInt8]) -> SimResponse {
        guard let object = (try? JSONValue.parse(body))?.objectValue else {
            return .json(400, ["message": "the body must be a JSON object of fault switches"])
        }
        var newLimit: Int?
        if let v = object["rateLimit"] {
            guard let n = v.intValue, n >= 0 else {
                return .json(400, ["message": "rateLimit must be a non-negative integer"])
            }
            newLimit = n
        }
        // Read, merge and write under one lock: concurrent POSTs (several loops) lose no switch.
        let merged: Result<SimFaults, SimError> = state.withLock { s in
            var next = s.faultState
            do throws(SimError) {
                try next.merge(object)
            } catch {
                return .failure(error)
            }
            s.faultState = next
            if let newLimit { s.limit = newLimit }
            return .success(next)
        }
        switch merged {
        case .failure(let error): return .json(400, ["message": .string(error.message)])
        case .success(let next): return .json(200, next.json)
        }
    }
}
