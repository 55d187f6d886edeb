#if canImport(Glibc)
    import Glibc
#endif

/// A fixed vocabulary of search terms with Zipf-distributed popularity, drawn from a seeded
/// generator so that runs are reproducible.
///
/// A value type; owned by one scenario on its loop thread.
public struct QueryMix {
    /// The vocabulary, most popular first.
    public static let vocabulary = [
        "swift", "react", "linux", "python", "rust", "kubernetes", "vapor", "hummingbird", "libevent", "nginx",
        "tensorflow", "django", "rails", "postgres", "redis", "sqlite", "docker", "terraform", "vim", "emacs",
        "swiftui", "combine", "nio", "grpc", "graphql", "webassembly", "llvm", "clang", "gcc", "zig",
        "kotlin", "flutter", "electron", "svelte", "vue", "angular", "spring", "quarkus", "deno", "bun",
        "pytorch", "jupyter", "pandas", "numpy", "scikit", "keras", "opencv", "ffmpeg", "gstreamer", "wayland",
    ]
    private var rng: SplitMix64
    private let cumulative: [Double]

    /// A mix with exponent `s` (1.0 is classic Zipf) seeded with `seed`.
    public init(seed: UInt64 = 42, exponent s: Double = 1.0) {
        rng = SplitMix64(seed: seed)
        var sum = 0.0
        var c: [Double] = []
        for rank in 1...Self.vocabulary.count {
            sum += 1 / Glibc.exp(s * Glibc.log(Double(rank)))
            c.append(sum)
        }
        cumulative = c.map { $0 / sum }
    }

    /// The next query.
    public mutating func nextQuery() -> String {
        let u = nextUniform()
        let index = cumulative.firstIndex { $0 >= u } ?? (cumulative.count - 1)
        return Self.vocabulary[index]
    }

    /// A uniform number in [0, 1).
    public mutating func nextUniform() -> Double { Double(rng.next() >> 11) / Double(1 << 53) }

}

/// The SplitMix64 generator (a value; owned by its user).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    /// A generator seeded with `seed`.
    public init(seed: UInt64) { state = seed }
    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
