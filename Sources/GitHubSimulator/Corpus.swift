import Foundation

/// The simulator's deterministic set of repositories: the same seed and count give the same
/// corpus on every machine. Stars and forks follow a Zipf distribution; some descriptions carry
/// hostile HTML and tricky Unicode; some languages and descriptions are null; some repositories
/// omit `topics`.
///
/// Immutable after creation; safe on any thread.
package struct Corpus: Sendable {
    /// All repositories, in id order.
    package let repositories: [CorpusRepository]
    /// Lower-cased owner logins present in the corpus.
    package let owners: Set<String>

    /// Generates `count` repositories from `seed`.
    package init(seed: UInt64 = 42, count: Int = 5000) {
        var rng = SplitMix64(seed: seed)
        let ownerCount = max(1, count / 8)
        var ownerNames: [String] = []
        var seenOwners = Set<String>()
        while ownerNames.count < ownerCount {
            var login = rng.pick(Words.syllables) + rng.pick(Words.syllables)
            if rng.chance(0.5) { login += rng.pick(Words.syllables) }
            if rng.chance(0.25) { login += "-" + rng.pick(Words.ownerSuffixes) }
            if seenOwners.insert(login).inserted { ownerNames.append(login) }
        }
        // Zipf ranks: a random permutation of 1...count.
        var ranks = Array(1...max(1, count))
        ranks.shuffle(using: &rng)
        var repos: [CorpusRepository] = []
        repos.reserveCapacity(count)
        var fullNames = Set<String>()
        for i in 0..<count {
            // Owners are Zipf-popular too: a few own many repositories.
            let ownerIndex = min(ownerCount - 1, Int(Double(ownerCount) * rng.unit() * rng.unit()))
            let owner = ownerNames[ownerIndex]
            var name = rng.pick(Words.nouns)
            if rng.chance(0.7) { name = rng.pick(Words.adjectives) + "-" + name }
            if rng.chance(0.2) { name += rng.pick(["-kit", "-js", ".swift", "-rs", "-py", "-cli", "2", "-core"]) }
            while !fullNames.insert("\(owner)/\(name)").inserted { name += "-\(rng.next() % 100)" }
            let language: String? = rng.chance(0.08) ? nil : Corpus.weightedLanguage(&rng)
            let description = Corpus.description(&rng, index: i, name: name, language: language)
            let topicCount = Int(rng.next() % 5)
            var topics = Set<String>()
            for _ in 0..<topicCount { topics.insert(rng.pick(Words.topics)) }
            if let language, rng.chance(0.5) {
                topics.insert(language.lowercased().replacingOccurrences(of: "+", with: "p"))
            }
            let rank = Double(ranks[i])
            let stars = Int(250_000 / rank) + Int(rng.next() % 7)
            let forks = Int(Double(stars) * (0.03 + 0.3 * rng.unit()))
            let created = Int(rng.next() % 3000)  // days after 2012-01-01
            let updated = created + Int(rng.next() % UInt64(max(1, 5000 - created)))
            repos.append(
                CorpusRepository(
                    id: 10_000_000 + i * 13 + Int(rng.next() % 13), owner: owner, ownerID: 500_000 + ownerIndex * 7,
                    name: name,
                    description: description, language: language,
                    topics: rng.chance(0.1) ? nil : topics.sorted(),
                    stars: stars, forks: forks,
                    createdAt: Corpus.timestamp(days: created, seconds: Int(rng.next() % 86_400)),
                    updatedAt: Corpus.timestamp(days: updated, seconds: Int(rng.next() % 86_400))))
        }
        repositories = repos
        owners = Set(ownerNames.map { $0.lowercased() })
    }

    static func weightedLanguage(_ rng: inout SplitMix64) -> String {
        let total = Words.languages.reduce(0) { $0 + $1.1 }
        var x = Int(rng.next() % UInt64(total))
        for (language, weight) in Words.languages {
            if x < weight { return language }
            x -= weight
        }
        return "Swift"
    }

    static func description(_ rng: inout SplitMix64, index: Int, name: String, language: String?) -> String? {
        if index % 41 == 7 { return rng.pick(Words.hostile) }
        if index % 23 == 5 { return rng.pick(Words.unicode) }
        if rng.chance(0.06) { return nil }
        let template = rng.pick(Words.templates)
        return
            template
            .replacingOccurrences(of: "{adj}", with: rng.pick(Words.adjectives))
            .replacingOccurrences(of: "{noun}", with: rng.pick(Words.nouns))
            .replacingOccurrences(of: "{lang}", with: language ?? "any language")
            .replacingOccurrences(of: "{topic}", with: rng.pick(Words.topics))
            .replacingOccurrences(of: "{name}", with: name)
    }

    /// `2012-01-01` plus `days`, at `seconds` past midnight, as GitHub writes it (ISO 8601, Z).
    static func timestamp(days: Int, seconds: Int) -> String {
        // Civil-from-days (Howard Hinnant), days counted from 1970-01-01.
        let z = days + 15_340 + 719_468  // 15340 = days from 1970-01-01 to 2012-01-01
        let era = z / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(y)-\(two(m))-\(two(d))T\(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60))Z"
    }
}
