// swift-tools-version:6.2
// The package of the `bff` server: see README.md and docs/ARCHITECTURE.md for the layers.
import PackageDescription

let package = Package(
    name: "bff",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "bff", targets: ["bff"]),
        .executable(name: "github-sim", targets: ["github-sim"]),
        .executable(name: "bff-load", targets: ["bff-load"]),
        // Write view models and host them (`import BFFKit`); test them without sockets (`import BFFTesting`).
        .library(name: "BFFKit", targets: ["BFFKit"]),
        .library(name: "BFFTesting", targets: ["BFFTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.1.0"),
    ],
    targets: [
        // MARK: C wrappers (system libraries)
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent",
            providers: [.apt(["libevent-dev"]), .brew(["libevent"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .systemLibrary(
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"]), .brew(["hiredis"])]
        ),
        // MARK: C shims (headers only, nothing to link)
        // ThreadSanitizer's acquire/release annotations as weak symbols (Primitives' `Lock`).
        .systemLibrary(name: "CTSan"),
        // epoll and timerfd, which Swift's Glibc module does not include (LoadKit's load loop).
        .systemLibrary(name: "CEpoll"),
        .systemLibrary(name: "CSpawn"),

        // MARK: Lowest layer: values, and the primitives several layers share (lock, clock, token bucket)
        .target(name: "Primitives", dependencies: ["CTSan"]),
        .target(name: "JSON"),
        .target(name: "GitHubSearch"),

        // MARK: Event loops on libevent (one event_base per thread), below HTTP and Redis
        .target(name: "EventLoop", dependencies: ["CLibevent", "Primitives"]),

        // MARK: HTTP over libevent's evhttp
        .target(
            name: "EventHTTP",
            dependencies: [
                "CLibevent", "EventLoop", "JSON", "Primitives",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),

        // MARK: Redis on the event loops (the only importer of CHiredis), and cluster-mode building blocks
        .target(
            name: "RedisClient",
            dependencies: ["CHiredis", "EventLoop", "Primitives", .product(name: "Logging", package: "swift-log")]
        ),
        .target(name: "ClusterStore", dependencies: ["Primitives"]),
        .target(name: "ClusterRedis", dependencies: ["ClusterStore", "RedisClient", "EventLoop", "Primitives"]),

        // MARK: View models: the kit (protocol, store, effects, registry), then the product's view models
        .target(name: "ViewModels", dependencies: ["JSON"]),
        .target(name: "Features", dependencies: ["ViewModels", "JSON", "GitHubSearch"]),

        // MARK: Sign-in rules (return paths, PKCE, the login cookie, the cross-site rule, pending sign-ins)
        .target(name: "SignIn", dependencies: ["Primitives", .product(name: "Crypto", package: "swift-crypto")]),

        // MARK: GitHub gateway, cache and simulator
        .target(
            name: "GitHubLive",
            dependencies: [
                "GitHubSearch", "CSQLite", "Primitives", .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "GitHubSimulator",
            dependencies: ["EventHTTP", "JSON", "Primitives", .product(name: "Crypto", package: "swift-crypto")]
        ),

        // MARK: The host: sessions, streams and the cluster backend for any registered view models
        .target(
            name: "BFF",
            dependencies: [
                "EventHTTP", "Primitives", "JSON", "ViewModels", "ClusterStore", "ClusterRedis", "RedisClient",
                "SignIn",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),

        // MARK: The product: the host with the search view models, GitHub and the upstream the cluster shares
        .target(
            name: "SearchApp",
            dependencies: [
                "BFF", "Features", "ViewModels", "GitHubSearch", "GitHubLive", "EventHTTP", "ClusterStore",
                "ClusterRedis", "RedisClient", "Primitives", "JSON", "SignIn",
                .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),

        // MARK: The libraries other packages build on
        .target(
            name: "BFFKit",
            dependencies: ["BFF", "ViewModels", "JSON", .product(name: "Logging", package: "swift-log")]),
        .target(name: "HTTPTesting", dependencies: ["EventHTTP"]),
        .target(
            name: "BFFTesting",
            dependencies: [
                "BFFKit", "BFF", "EventHTTP", "HTTPTesting", "ViewModels", "JSON",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Clients: test client and load tool
        .target(name: "WireClient", dependencies: ["Primitives"]),
        .target(
            name: "LoadKit",
            dependencies: [
                "WireClient", "JSON", "CEpoll",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),

        // MARK: Executables (short mains: parse flags, build, run)
        .executableTarget(
            name: "bff",
            dependencies: [
                "BFF", "SearchApp", "Features", "ViewModels", "GitHubSearch", "EventHTTP", "ClusterRedis",
                "RedisClient", "EventLoop", "JSON",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "github-sim",
            dependencies: [
                "GitHubSimulator", "EventHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "bff-load",
            dependencies: ["LoadKit", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),

        // MARK: Tests
        .testTarget(name: "PrimitivesTests", dependencies: ["Primitives"]),
        .testTarget(name: "BFFTestingTests", dependencies: ["BFFTesting"]),
        .testTarget(name: "JSONTests", dependencies: ["JSON"]),
        .testTarget(name: "SignInTests", dependencies: ["SignIn"]),
        .testTarget(
            name: "EventHTTPTests",
            dependencies: [
                "EventHTTP", "HTTPTesting", "WireClient", "JSON", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"]),
        .target(name: "RedisTestSupport", dependencies: ["RedisClient", "EventLoop", "CSpawn"]),
        .testTarget(name: "RedisClientTests", dependencies: ["RedisClient", "RedisTestSupport", "EventLoop"]),
        .testTarget(
            name: "ClusterRedisTests",
            dependencies: ["ClusterRedis", "ClusterStore", "RedisClient", "RedisTestSupport", "EventLoop"]
        ),
        .testTarget(
            name: "ViewModelsTests", dependencies: ["ViewModels", "Features", "GitHubSearch", "JSON", "BFFTesting"]),
        .testTarget(
            name: "GitHubLiveTests",
            dependencies: [
                "GitHubLive", "GitHubSearch", "GitHubSimulator", "EventHTTP", "HTTPTesting", "WireClient", "JSON",
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "BFFTests",
            dependencies: [
                "BFF", "SearchApp", "EventHTTP", "HTTPTesting", "WireClient", "JSON", "GitHubSimulator", "GitHubSearch",
                "GitHubLive",
                "RedisTestSupport", "ClusterStore", "ClusterRedis", "RedisClient", "ViewModels", "Features",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LoadKitTests",
            dependencies: [
                "LoadKit", "BFF", "SearchApp", "Features", "ViewModels", "WireClient", "EventHTTP", "GitHubSearch",
                "JSON",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)
