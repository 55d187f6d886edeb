import Foundation
import GitHubSearch

/// GitHub's JSON wire format for `GET /search/repositories`, and its mapping to the domain.
///
/// Only the fields the product uses are declared; everything else GitHub sends is ignored.
/// `description`, `language` and `topics` may be `null` or absent; `incomplete_results` is
/// absent in older responses. Plain values; safe on any thread.
public enum GitHubWire {
    /// The top-level search body.
    public struct SearchBody: Decodable, Sendable {
        public var totalCount: Int
        public var incompleteResults: Bool?
        public var items: [Item]

        enum CodingKeys: String, CodingKey {
            case totalCount = "total_count"
            case incompleteResults = "incomplete_results"
            case items
        }
    }

    /// One repository in `items`.
    public struct Item: Decodable, Sendable {
        public var id: Int
        public var fullName: String
        public var owner: Owner
        public var htmlURL: String
        public var description: String?
        public var language: String?
        public var stargazersCount: Int
        public var forksCount: Int
        public var topics: [String]?
        public var updatedAt: String

        enum CodingKeys: String, CodingKey {
            case id
            case fullName = "full_name"
            case owner
            case htmlURL = "html_url"
            case description
            case language
            case stargazersCount = "stargazers_count"
            case forksCount = "forks_count"
            case topics
            case updatedAt = "updated_at"
        }
    }

    /// The owner object of an item.
    public struct Owner: Decodable, Sendable {
        public var login: String
        public var avatarURL: String?

        enum CodingKeys: String, CodingKey {
            case login
            case avatarURL = "avatar_url"
        }
    }

    /// GitHub's error body: `{"message": …, "errors": [{"message"?, "field"?, "code"?}]}`.
    public struct ErrorBody: Decodable, Sendable {
        public var message: String?
        public var errors: [ErrorDetail]?

        /// One entry of `errors`.
        public struct ErrorDetail: Decodable, Sendable {
            public var message: String?
            public var field: String?
            public var code: String?
        }

        /// The most specific human sentence: the `errors[].message`s, else `message` plus the
        /// failing field and code, else nil.
        public var humanMessage: String? {
            let details = (errors ?? []).compactMap(\.message).filter { !$0.isEmpty }
            if !details.isEmpty { return details.joined(separator: " ") }
            let codes = (errors ?? []).compactMap { e -> String? in
                guard let field = e.field else { return nil }
                return e.code.map { "\(field) \($0)" } ?? field
            }
            if let message, !codes.isEmpty { return "\(message): \(codes.joined(separator: ", "))" }
            return message
        }
    }

    /// Decodes a search body into a page.
    ///
    /// - Parameters:
    ///   - body: the response body.
    ///   - request: the request it answers (gives the page number and the cap arithmetic).
    ///   - link: the parsed `Link` header, if any.
    public static func decodePage(_ body: Data, request: SearchRequest, link: LinkHeader?) throws -> SearchPage {
        let decoded = try JSONDecoder().decode(SearchBody.self, from: body)
        let hasNext = link?.next != nil
        return SearchPage(
            totalCount: decoded.totalCount,
            incompleteResults: decoded.incompleteResults ?? false,
            repositories: decoded.items.map(\.repository),
            page: request.page,
            hasMore: hasNext && !request.nextPage.isPastResultCap
        )
    }
}

extension GitHubWire.Item {
    /// The domain value of this item.
    public var repository: Repository {
        Repository(
            id: id, fullName: fullName, owner: owner.login, avatarURL: owner.avatarURL ?? "",
            description: description, language: language, stars: stargazersCount, forks: forksCount,
            topics: topics ?? [], htmlURL: htmlURL, updatedAt: updatedAt
        )
    }
}
