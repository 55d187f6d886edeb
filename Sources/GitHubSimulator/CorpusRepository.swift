import JSON

/// One repository of the simulator's corpus, with the lower-cased fields the query engine matches.
///
/// An immutable value; safe on any thread.
package struct CorpusRepository: Sendable, Equatable {
    package var id: Int
    package var owner: String
    package var ownerID: Int
    package var name: String
    /// May be nil (GitHub sends `null`).
    package var description: String?
    /// May be nil (GitHub sends `null`).
    package var language: String?
    /// nil means the `topics` key is absent from the JSON.
    package var topics: [String]?
    package var stars: Int
    package var forks: Int
    package var createdAt: String
    package var updatedAt: String
    let lowerName: [UInt8]
    let lowerDescription: [UInt8]
    let lowerTopics: [[UInt8]]

    /// Creates a repository.
    package init(
        id: Int, owner: String, ownerID: Int, name: String, description: String?, language: String?, topics: [String]?,
        stars: Int, forks: Int, createdAt: String, updatedAt: String
    ) {
        self.id = id
        self.owner = owner
        self.ownerID = ownerID
        self.name = name
        self.description = description
        self.language = language
        self.topics = topics
        self.stars = stars
        self.forks = forks
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        lowerName = Array(name.lowercased().utf8)
        lowerDescription = Array((description ?? "").lowercased().utf8)
        lowerTopics = (topics ?? []).map { Array($0.lowercased().utf8) }
    }

    /// `owner/name`.
    package var fullName: String { "\(owner)/\(name)" }

    /// The item as GitHub's search API renders it (the common subset of its fields).
    package func json(score: Double) -> JSONValue {
        var o: JSONObject = [
            "id": .int(id),
            "node_id": .string("R_sim\(id)"),
            "name": .string(name),
            "full_name": .string(fullName),
            "private": false,
            "owner": .object([
                "login": .string(owner), "id": .int(ownerID),
                "avatar_url": .string("https://avatars.githubusercontent.com/u/\(ownerID)?v=4"),
                "url": .string("https://api.github.com/users/\(owner)"),
                "html_url": .string("https://github.com/\(owner)"), "type": "User", "site_admin": false,
            ]),
            "html_url": .string("https://github.com/\(fullName)"),
            "description": .optional(description),
            "fork": false,
            "url": .string("https://api.github.com/repos/\(fullName)"),
            "created_at": .string(createdAt),
            "updated_at": .string(updatedAt),
            "pushed_at": .string(updatedAt),
            "homepage": nil,
            "size": .int(stars % 9973 + 12),
            "stargazers_count": .int(stars),
            "watchers_count": .int(stars),
            "language": .optional(language),
            "forks_count": .int(forks),
            "open_issues_count": .int(forks % 97),
            "default_branch": "main",
            "visibility": "public",
            "score": .double(score),
        ]
        if let topics { o["topics"] = .array(topics.map(JSONValue.string)) }
        return .object(o)
    }
}

/// True when `needle` occurs in `haystack` (byte-wise; both already lower-cased UTF-8).
func bytesContain(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    if needle.isEmpty { return true }
    if needle.count > haystack.count { return false }
    return haystack.withUnsafeBufferPointer { h in
        needle.withUnsafeBufferPointer { n in
            let first = n[0]
            let last = h.count - n.count
            var i = 0
            outer: while i <= last {
                if h[i] == first {
                    var k = 1
                    while k < n.count {
                        if h[i + k] != n[k] {
                            i += 1
                            continue outer
                        }
                        k += 1
                    }
                    return true
                }
                i += 1
            }
            return false
        }
    }
}
