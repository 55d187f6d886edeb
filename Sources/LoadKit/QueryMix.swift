#if canImport(Glibc)
    import Glibc
#endif

/// A fixed vocabulary of search terms with Zipf-distributed popularity, drawn from a seeded
/// generator so that runs are reproducible.
///
/// `terms` widens the vocabulary past the 50 words into a long tail of two-word queries (rank 51
/// on: `"swift redis"`-like pairs of the words, up to `maximumTerms`), as real search logs have.
/// `variants` is the probability that a query is typed differently from its canonical form
/// (capitalised, upper-cased, padded with spaces, inner spaces doubled): the same search to a
/// human and to GitHub (case-insensitive), a different string to a naive cache key.
///
/// A value type; owned by one scenario on its loop thread.
package struct QueryMix {
    /// The vocabulary, most popular first.
    package static let vocabulary = [
        "swift", "react", "linux", "python", "rust", "kubernetes", "vapor", "hummingbird", "libevent", "nginx",
        "tensorflow", "django", "rails", "postgres", "redis", "sqlite", "docker", "terraform", "vim", "emacs",
        "swiftui", "combine", "nio", "grpc", "graphql", "webassembly", "llvm", "clang", "gcc", "zig",
        "kotlin", "flutter", "electron", "svelte", "vue", "angular", "spring", "quarkus", "deno", "bun",
        "pytorch", "jupyter", "pandas", "numpy", "scikit", "keras", "opencv", "ffmpeg", "gstreamer", "wayland",
    ]
    /// The largest `terms`: the 50 words and every ordered pair of two different words.
    package static let maximumTerms = vocabulary.count * vocabulary.count
    private var rng: SplitMix64
    private let cumulative: [Double]
    private let variants: Double

    /// A mix with exponent `s` (1.0 is classic Zipf) over `terms` queries (50 … `maximumTerms`),
    /// typed as a variant with probability `variants`, seeded with `seed`.
    package init(seed: UInt64 = 42, exponent s: Double = 1.0, terms: Int = vocabulary.count, variants: Double = 0) {
        rng = SplitMix64(seed: seed)
        self.variants = max(0, min(1, variants))
        var sum = 0.0
        var c: [Double] = []
        for rank in 1...max(1, min(terms, Self.maximumTerms)) {
            sum += 1 / Glibc.exp(s * Glibc.log(Double(rank)))
            c.append(sum)
        }
        cumulative = c.map { $0 / sum }
    }

    /// The next query, as the user types it.
    package mutating func nextQuery() -> String {
        let u = nextUniform()
        let index = cumulative.firstIndex { $0 >= u } ?? (cumulative.count - 1)
        let query = Self.term(rank: index)
        guard variants > 0, nextUniform() < variants else { return query }
        return Self.variant(of: query, kind: Int(nextUniform() * 4))
    }

    /// The canonical query of 0-based popularity rank `rank`: a word, or past the 50 words a pair.
    package static func term(rank: Int) -> String {
        let n = vocabulary.count
        guard rank >= n else { return vocabulary[rank] }
        let j = rank - n
        let first = j % n
        let second = (first + 1 + (j / n) % (n - 1)) % n
        return vocabulary[first] + " " + vocabulary[second]
    }

    /// `query` typed another way (`kind` 0…3): capitalised, upper-cased, padded with spaces, or
    /// with its inner spaces doubled (padded when it has none).
    package static func variant(of query: String, kind: Int) -> String {
        switch kind % 4 {
        case 0: return query.prefix(1).uppercased() + query.dropFirst()
        case 1: return query.uppercased()
        case 2: return " " + query + " "
        default:
            return query.contains(" ") ? query.split(separator: " ").joined(separator: "  ") : query + "  "
        }
    }

    /// A uniform number in [0, 1).
    package mutating func nextUniform() -> Double { Double(rng.next() >> 11) / Double(1 << 53) }

}

/// The SplitMix64 generator (a value; owned by its user).
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    /// A generator seeded with `seed`.
    package init(seed: UInt64) { state = seed }
    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
