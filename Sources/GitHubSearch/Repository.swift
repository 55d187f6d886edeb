/// GitHubSearch: the domain of repository search and the boundary every search implementation
/// conforms to.
///
/// This module is the abstraction of the dependency-inversion rule: the `search` view model
/// depends on `RepositorySearching`; the live GitHub gateway, the cache decorator and test
/// fakes conform to it. Plain value types only; no HTTP, no JSON wire format, no I/O.

/// A GitHub repository as the product shows it (a plain value; GitHub's wire format is the
/// gateway's business).
public struct Repository: Sendable, Equatable, Hashable, Codable {
    /// GitHub's numeric repository id.
    public var id: Int
    /// `owner/name`.
    public var fullName: String
    /// The owner's login.
    public var owner: String
    /// The owner's avatar image URL.
    public var avatarURL: String
    /// The description, if any (untrusted text).
    public var description: String?
    /// The main language, if GitHub knows one.
    public var language: String?
    /// Stargazer count.
    public var stars: Int
    /// Fork count.
    public var forks: Int
    /// Topics (possibly empty).
    public var topics: [String]
    /// The repository's web page (`html_url`).
    public var htmlURL: String
    /// Last update time as GitHub sent it (ISO 8601, UTC).
    public var updatedAt: String

    /// The stored names (the search cache's SQLite rows and durable view-model state keep them): explicit
    /// so that renaming a property cannot silently change what was written before.
    enum CodingKeys: String, CodingKey {
        case id, fullName, owner, avatarURL, description, language, stars, forks, topics, htmlURL, updatedAt
    }

    public init(
        id: Int, fullName: String, owner: String, avatarURL: String, description: String?, language: String?,
        stars: Int, forks: Int, topics: [String], htmlURL: String, updatedAt: String
    ) {
        self.id = id
        self.fullName = fullName
        self.owner = owner
        self.avatarURL = avatarURL
        self.description = description
        self.language = language
        self.stars = stars
        self.forks = forks
        self.topics = topics
        self.htmlURL = htmlURL
        self.updatedAt = updatedAt
    }
}
