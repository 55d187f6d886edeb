import GitHubSearch
import JSON

/// The `status` view model's logic: app-wide reachability of GitHub, fed by the composition root with
/// `UpstreamStatus` values. It has no inputs.
///
/// A pure value; run it with `StatusViewModel` (a `Store`), on that store's owner.
public struct StatusFeature: ViewModelFeature {
    /// The state is the last status reported.
    public typealias State = UpstreamStatus

    /// The only action: a new status arrived (not a session input).
    public enum Action: Sendable, Equatable {
        /// The composition root reported a status.
        case statusUpdated(UpstreamStatus)
    }

    /// The feature (it has no dependencies).
    public init() {}

    public var name: String { "status" }
    public var inputNames: [String] { [] }
    public var outputs: [Output<State>] {
        [
            .bool("reachable") { $0.reachable },
            .optionalString("message") { $0.message },
            Output("rateLimit", { $0.rateLimit }, encode: StatusFeature.encode),
        ]
    }

    /// Every input is unknown: sessions cannot change the status.
    public func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
        throw unknownInput(input)
    }

    public func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>] {
        switch action {
        case .statusUpdated(let status): state = status
        }
        return []
    }

    /// `null`, or `{"limit","remaining","resetAt"}` with `resetAt` as an ISO 8601 UTC time.
    static func encode(_ rateLimit: RateLimit?) -> JSONValue {
        guard let r = rateLimit else { return .null }
        return [
            "limit": .int(r.limit), "remaining": .int(r.remaining),
            "resetAt": .string(UTCTimestamp.iso8601(epochSeconds: r.resetAt)),
        ]
    }
}
