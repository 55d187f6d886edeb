import ArgumentParser
import LoadKit

/// The `bff-load` command and its scenarios.
struct BffLoad: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bff-load",
        abstract: "Load-test a bff deployment: sessions, event streams and inputs, not just request rates.",
        discussion: "Latency is measured open-loop: from each action's scheduled time, so a slow server cannot "
            + "hide its latency by slowing the client. Progress goes to stderr once a second; the result "
            + "table (or --json) to stdout.",
        subcommands: [Latency.self, Streams.self, Search.self, Rest.self]
    )
}

/// Flags every scenario takes.
struct CommonOptions: ParsableArguments {
    @Option(help: "Base URL of the server.")
    var url = "http://127.0.0.1:8080"
    @Option(help: "Seconds of load.")
    var duration = 10.0
    @Flag(help: "Print the result as JSON instead of a table.")
    var json = false
    @Flag(help: "No progress lines on stderr.")
    var quiet = false
    @Flag(help: "Keep the sessions the run created (default: delete them).")
    var keepSessions = false
    @Option(
        help:
            "Local addresses to connect from, spread over the connections: A[,B…] or ranges like 127.0.0.2-127.0.0.40 (every 127/8 address is loopback: one run plays many clients)."
    )
    var source: String?

    func target() throws -> Target { try withSources(Target(url: url)) }

    /// `t` with the connections made from `--source`, when given.
    func withSources(_ t: Target) throws -> Target { try source.map { try t.from(sources: $0) } ?? t }

    func emit(_ report: LoadReport) {
        print(json ? report.json.text : report.table, terminator: json ? "\n" : "")
    }
}

extension BffLoad {
    struct Latency: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Input-to-output latency: S sessions with streams, greeting inputs at total rate R.",
            discussion: """
                Sessions are created (and deleted) on --url. --post-url sends the inputs and --stream-url opens \
                the event streams on other base URLs (default: --url). In cluster mode the node that creates a \
                session owns it, so --url is the owner: e.g. --url NODE1 --post-url NODE2 --stream-url NODE3 \
                posts every input to a non-owner (forwarded to the owner through Redis) and streams from a \
                third node.
                """)
        @OptionGroup var common: CommonOptions
        @Option(help: "Sessions, each with one open stream.") var sessions = 200
        @Option(help: "Inputs per second in total (spread round-robin over the sessions).") var rate = 2000.0
        @Option(help: "Keep-alive connections for the POSTs.") var connections = 16
        @Option(help: "Seconds to wait for outstanding events after the last input.") var grace = 2.0
        @Option(help: "Base URL the inputs are POSTed to (default: --url, where the sessions are created).")
        var postUrl: String?
        @Option(help: "Base URL the event streams are opened on (default: --url, where the sessions are created).")
        var streamUrl: String?
        @Flag(
            help: """
                Spin on epoll instead of sleeping during the load (uses all of the client's core): the figures \
                then exclude the client's own wake-up delays (see scheduleLag).
                """) var busyPoll = false
        @Flag(
            help: """
                Send each input with an Idempotency-Key of its own, as the browser does (in cluster mode a node \
                that took a session over looks each key up in Redis before the commit).
                """) var idempotencyKeys = false
        @Option(
            help: """
                Sessions per event stream, as a browser's tabs share one: N puts the sessions in groups of N, each \
                group on one multiplexed stream (GET /api/events?sessions=...; bff allows 32 by default); 0, each \
                session its own stream.
                """) var tabs = 0
        @Option(
            help: """
                Also write every measured latency to this file, one line per input whose event arrived: \
                "<scheduled send time, us after the first> <latency, us>" (for pooling several runs exactly).
                """) var samples: String?

        func run() throws {
            var o = LatencyScenario.Options()
            o.sessions = sessions
            o.rate = rate
            o.duration = common.duration
            o.connections = connections
            o.grace = grace
            o.progress = !common.quiet
            o.cleanup = !common.keepSessions
            o.busyPoll = busyPoll
            o.idempotencyKeys = idempotencyKeys
            guard tabs >= 0 else { throw ValidationError("--tabs must be 0 or more, not \(tabs)") }
            o.tabs = tabs
            o.samplesPath = samples
            o.postTarget = try postUrl.map { try common.withSources(Target(url: $0)) }
            o.streamTarget = try streamUrl.map { try common.withSources(Target(url: $0)) }
            common.emit(try LatencyScenario.run(target: common.target(), options: o))
        }
    }

    struct Streams: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Idle-stream capacity: K sessions with one stream each, memory per stream, broadcast fan-out.",
            discussion: """
                The broadcast posts to the server's test hook (POST /api/_test/status), which exists only when bff \
                runs with --test-hooks; without it the report says "broadcast skipped: server has no test hook".
                """)
        @OptionGroup var common: CommonOptions
        @Option(help: "Streams (and sessions) to open.") var streams = 1000
        @Option(help: "Server PID, for RSS from /proc (else /metrics process_resident_memory_bytes).") var pid: Int32?
        @Option(help: "Seconds to hold the streams before measuring memory.") var hold = 2.0
        @Option(help: "Streams being established at once (and sessions deleted at once at the end).")
        var concurrency = 200
        @Option(
            help: """
                Several loaders, one broadcast: post none; write this file (the arming time, CLOCK_MONOTONIC ns) \
                once the streams are held and measured, then wait for another's status change to reach every \
                stream; the report gives broadcastFirstAtNs and broadcastLastAtNs on the same clock.
                """) var broadcastReadyFile: String?
        @Option(
            help: """
                With --broadcast-ready-file: write this file (CLOCK_MONOTONIC ns) once the broadcast reached every \
                stream (or --broadcast-timeout passed).
                """) var broadcastSeenFile: String?
        @Option(
            help: """
                Keep the streams open after the broadcast until this file exists (at most --broadcast-timeout s), \
                then close them and delete the sessions: several loaders on one host then tear down together, \
                after every broadcast is measured, not during the others' broadcasts.
                """) var teardownAfterFile: String?
        @Option(help: "Seconds to wait for the broadcast to reach every stream.") var broadcastTimeout = 30.0
        @Option(
            help: """
                Open the streams here instead of on --url, which creates (and so, in a cluster, runs) the \
                sessions: streams on another node are fed through Redis. The memory measured is this server's (--pid: its PID).
                """) var streamUrl: String?
        @Option(
            help: """
                While the streams are held and the broadcast is read: seconds to sleep after each batch of socket \
                events before waiting for more (0: none). Sockets that become readable meanwhile are read in one \
                batch without a wake-up each. On loopback the server's write pays the reader's wake-up: with one \
                loader and one server on a host, 0.001 cut the server's CPU per stream and broadcast \
                (docs/BENCHMARKS.md). Every event is then seen up to this much later (and the \
                broadcast's times include it).
                """) var readBatch = 0.0

        func run() throws {
            guard (0...1).contains(readBatch) else {
                throw ValidationError("--read-batch must be 0 to 1 seconds, not \(readBatch)")
            }
            var o = StreamsScenario.Options()
            o.broadcastReadyFile = broadcastReadyFile
            o.broadcastSeenFile = broadcastSeenFile
            o.teardownAfterFile = teardownAfterFile
            o.broadcastTimeout = broadcastTimeout
            o.streamTarget = try streamUrl.map { try common.withSources(Target(url: $0)) }
            o.streams = streams
            o.pid = pid
            o.hold = hold
            o.concurrency = concurrency
            o.progress = !common.quiet
            o.cleanup = !common.keepSessions
            o.readBatch = readBatch
            common.emit(try StreamsScenario.run(target: common.target(), options: o))
        }
    }

    struct Search: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A realistic search mix through the search view model (Zipf queries, paging, sorting).")
        @OptionGroup var common: CommonOptions
        @Option(help: "Sessions, each with one open stream.") var sessions = 20
        @Option(help: "Shortest think time between a user's actions, seconds (uniformly random up to --think-max).")
        var thinkMin = 10.0
        @Option(help: "Longest think time between a user's actions, seconds.") var thinkMax = 30.0
        @Option(
            help:
                "Exponential think time with this mean, seconds, instead of --think-min/--think-max (0.5: the older stress mix)."
        ) var think: Double?
        @Option(help: "Queries in the Zipf vocabulary: 50 words, more adds a long tail of word pairs (up to 2500).")
        var terms = 50
        @Option(help: "Probability (0...1) that a query is typed as a case/space variant of its canonical form.")
        var variants = 0.0
        @Option(help: "Seconds of load before --duration whose searches are not counted (the cache fills).")
        var warmup = 0.0
        @Option(help: "GitHub simulator base URL, for GET /_sim/stats (upstream request count).") var simURL: String?
        @Option(help: "Random seed for the query mix.") var seed: UInt64 = 42
        @Flag(
            help:
                "Sign each session's person in first (load-user-N, approved on the simulator at --sim-url, which must be the server's GitHub): their searches spend their own budget."
        ) var signedIn = false

        func run() throws {
            var o = SearchScenario.Options()
            o.signedIn = signedIn
            o.sessions = sessions
            o.duration = common.duration
            o.think = think.map { .exponential(mean: $0) } ?? .uniform(min: thinkMin, max: max(thinkMin, thinkMax))
            o.terms = terms
            o.variants = variants
            o.warmup = warmup
            o.simURL = simURL
            o.seed = seed
            o.progress = !common.quiet
            o.cleanup = !common.keepSessions
            common.emit(try SearchScenario.run(target: common.target(), options: o))
        }
    }

    struct Rest: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Keep-alive request rate of GET /state (and, with --search-share, the stateless search).",
            discussion: """
                The report's non2xxReasons counts each non-2xx answer's problem detail by request kind (state or \
                search), e.g. "120× search 503: GitHub rate limit exhausted; retry in N s".
                """)
        @OptionGroup var common: CommonOptions
        @Option(help: "Keep-alive connections.") var connections = 16
        @Option(help: "Open-loop requests per second in total; 0 = closed loop (as fast as answers come).")
        var rate = 0.0
        @Option(
            help: """
                Share of requests to /api/search/repositories (0...1; default 0). Above 0 the server's uncached \
                searches spend its GitHub budget (30 a minute with a token): it then answers 503 rate limited, \
                and its users see "rate limit exhausted", until GitHub's reset. Said on stderr and in the report.
                """) var searchShare = 0.0
        @Flag(
            help: """
                Make every search's query one never asked before (unique-<n>-<run>) instead of the 50-word \
                Zipf mix: nothing can be served from the server's cache, so each search costs it a call of its \
                GitHub budget (an abusive client; the server's fair share refuses it past its share).
                """) var searchUnique = false

        func run() throws {
            var o = RestScenario.Options()
            o.connections = connections
            o.duration = common.duration
            o.rate = rate
            o.searchShare = searchShare
            o.searchUnique = searchUnique
            o.progress = !common.quiet
            o.cleanup = !common.keepSessions
            common.emit(try RestScenario.run(target: common.target(), options: o))
        }
    }
}
