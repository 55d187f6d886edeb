/// A small deterministic PRNG (SplitMix64): the same seed always yields the same corpus.
///
/// A value type; each user owns its copy.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Seeds the generator.
    package init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform double in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// One element of `items` (non-empty).
    mutating func pick<T>(_ items: [T]) -> T { items[Int(next() % UInt64(items.count))] }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { unit() < p }
}
