import ArgumentParser
import EventHTTP
import Foundation
import GitHubSimulator
import Logging

/// `github-sim`: serves GitHub's repository search from a generated corpus on a local port.
struct GitHubSimCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "github-sim",
        abstract: "A local GitHub search API (GET /search/repositories) for tests, demos and benchmarks.",
        discussion: """
            Serves a deterministic corpus like api.github.com: q with free text, language:, stars:, forks:, \
            user:/org:, in:, topic:; sort, order, per_page (<=100), page, the 1000-result cap, Link headers, \
            X-RateLimit-* headers with a real per-minute budget, and GitHub-shaped 401/403/422/429 bodies.

            Control endpoints (for tests): GET /_sim/stats, GET /_sim/faults, POST /_sim/faults with a JSON \
            object of switches (latencyMs, serverError, serverErrorStatus, primaryRateLimit, secondaryRateLimit, \
            retryAfterSeconds, malformedJSON, hang, rateLimit), POST /_sim/reset.

            Example: github-sim --port 9090 & GITHUB_API_URL=http://127.0.0.1:9090 bff
            """)

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free port; the bound port is printed).")
    var port = 9090

    @Option(help: "Seed of the generated corpus (same seed, same repositories).")
    var seed: UInt64 = 42

    @Option(help: "Number of repositories in the corpus.")
    var repositories = 5000

    @Option(
        name: .customLong("rate-limit"),
        help: "Search requests allowed per minute before 403 (GitHub: 30 with a token).")
    var rateLimit = 30

    @Option(
        help:
            "Require this bearer token when an Authorization header is sent (wrong token: 401). Prefer GITHUB_SIM_TOKEN."
    )
    var token: String?

    @Option(
        name: .customLong("oauth-client-id"),
        help: "The client id of the one OAuth app the sign-in flow (/login/oauth/…) knows.")
    var oauthClientID = "sim-client-id"

    @Option(
        name: .customLong("oauth-client-secret"),
        help: "That app's client secret (checked by the code exchange). Prefer GITHUB_SIM_CLIENT_SECRET.")
    var oauthClientSecret: String?

    @Option(name: .customLong("latency-ms"), help: "Delay every search answer by this many milliseconds.")
    var latencyMs = 0

    @Flag(name: .customLong("server-error"), help: "Fault: answer searches with a 5xx (see --server-error-status).")
    var serverError = false

    @Option(name: .customLong("server-error-status"), help: "The status of --server-error.")
    var serverErrorStatus = 502

    @Flag(name: .customLong("primary-rate-limit"), help: "Fault: answer searches with the primary rate-limit 403.")
    var primaryRateLimit = false

    @Flag(name: .customLong("secondary-rate-limit"), help: "Fault: answer searches with the secondary rate-limit 429.")
    var secondaryRateLimit = false

    @Option(name: .customLong("retry-after"), help: "Retry-After seconds of --secondary-rate-limit.")
    var retryAfter = 60

    @Flag(name: .customLong("malformed-json"), help: "Fault: answer searches with a truncated JSON body.")
    var malformedJSON = false

    @Flag(help: "Fault: never answer searches.")
    var hang = false

    @Option(help: "Event-loop threads.")
    var threads = 1

    func validate() throws {
        if !(0...65535).contains(port) { throw ValidationError("--port must be 0...65535") }
        if !(1...64).contains(threads) { throw ValidationError("--threads must be 1...64") }
        if repositories < 0 { throw ValidationError("--repositories must not be negative") }
        if rateLimit < 0 { throw ValidationError("--rate-limit must not be negative") }
        if latencyMs < 0 { throw ValidationError("--latency-ms must not be negative") }
        if !(500...599).contains(serverErrorStatus) { throw ValidationError("--server-error-status must be 500...599") }
        if retryAfter < 0 { throw ValidationError("--retry-after must not be negative") }
    }

    func run() throws {
        // Taken by sigwait below; blocked before any loop thread starts so that no thread receives them.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)
        var configuration = GitHubSimulator.Configuration()
        configuration.seed = seed
        configuration.repositories = repositories
        configuration.rateLimit = rateLimit
        configuration.token = token ?? ProcessInfo.processInfo.environment["GITHUB_SIM_TOKEN"]
        configuration.oauthClientID = oauthClientID
        configuration.oauthClientSecret =
            oauthClientSecret ?? ProcessInfo.processInfo.environment["GITHUB_SIM_CLIENT_SECRET"] ?? "sim-client-secret"
        configuration.faults.latencyMs = latencyMs
        configuration.faults.serverError = serverError
        configuration.faults.serverErrorStatus = serverErrorStatus
        configuration.faults.primaryRateLimit = primaryRateLimit
        configuration.faults.secondaryRateLimit = secondaryRateLimit
        configuration.faults.retryAfterSeconds = retryAfter
        configuration.faults.malformedJSON = malformedJSON
        configuration.faults.hang = hang
        let simulator = GitHubSimulator(configuration: configuration)

        var serverConfiguration = HTTPServer.Configuration()
        serverConfiguration.host = host
        serverConfiguration.port = port
        serverConfiguration.threads = max(1, threads)
        let logger = Logger(label: "github-sim")
        let server = HTTPServer(configuration: serverConfiguration, logger: logger)
        simulator.install(on: server.router)
        try server.start()
        let banner =
            "github-sim: \(simulator.corpus.repositories.count) repositories on http://\(host):\(server.port)\n"
        FileHandle.standardOutput.write(Data(banner.utf8))

        // SIGINT/SIGTERM are blocked (see the top of run) and taken here, like bff does. SIG_IGN plus
        // Dispatch signal sources never saw them on Linux: an ignored signal is discarded.
        var received: Int32 = 0
        sigwait(&signals, &received)
        server.shutdown(gracePeriod: 2)
    }
}
