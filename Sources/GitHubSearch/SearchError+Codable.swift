/// `SearchError` as stored in durable view-model state: `{"kind", "message", "retryAfterSeconds"?}`,
/// the same shape as the `search` view model's `error` output. Written by hand (not synthesized) so the
/// stored form names the kind explicitly and does not follow the Swift case layout.
extension SearchError: Codable {
    enum CodingKeys: String, CodingKey {
        case kind, message, retryAfterSeconds
    }

    /// Decodes `{"kind", "message", "retryAfterSeconds"?}`; an unknown kind is a data-corruption error.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let kind = try c.decode(String.self, forKey: .kind)
        let message = try c.decode(String.self, forKey: .message)
        switch kind {
        case "invalidQuery": self = .invalidQuery(message: message)
        case "rateLimited":
            self = .rateLimited(retryAfterSeconds: try c.decode(Int.self, forKey: .retryAfterSeconds), message: message)
        case "unavailable": self = .unavailable(message: message)
        case "upstream": self = .upstream(message: message)
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .kind, in: c, debugDescription: "unknown search error kind '\(kind)'")
        }
    }

    /// Encodes `{"kind", "message", "retryAfterSeconds"?}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(kind, forKey: .kind)
        try c.encode(message, forKey: .message)
        try c.encodeIfPresent(retryAfterSeconds, forKey: .retryAfterSeconds)
    }
}
