import GitHubSearch
import JSON
import ViewModels

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

    /// The contract name.
    public var name: String { "status" }
    /// The input names, in the contract's order.
    public var inputNames: [String] { [] }
    /// The state outputs, in snapshot order.
    public var outputs: [Output<State>] {
        [
            .bool("reachable") { $0.reachable },
            .optionalString("message") { $0.message },
            // Compared on what is shown, so a change of `resource` alone emits nothing.
            Output("rateLimit", { $0.rateLimit.map(ShownRateLimit.init) }, encode: StatusFeature.encode),
        ]
    }

    /// A reported `UpstreamStatus` replaces the state; other notices mean nothing here.
    public func action(for notice: any Sendable) -> Action? {
        (notice as? UpstreamStatus).map(Action.statusUpdated)
    }

    /// Every input is unknown: sessions cannot change the status.
    public func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
        throw unknownInput(input)
    }

    /// The transition (see `ViewModelFeature`).
    public func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>] {
        switch action {
        case .statusUpdated(let status): state = status
        }
        return []
    }

    /// The part of a `RateLimit` the `rateLimit` output shows.
    struct ShownRateLimit: Equatable, Sendable {
        var limit: Int
        var remaining: Int
        var resetAt: Int

        init(_ r: RateLimit) {
            limit = r.limit
            remaining = r.remaining
            resetAt = r.resetAt
        }
    }

    /// `null`, or `{"limit","remaining","resetAt"}` with `resetAt` as an ISO 8601 UTC time.
    static func encode(_ rateLimit: ShownRateLimit?) -> JSONValue {
        guard let r = rateLimit else { return .null }
        return [
            "limit": .int(r.limit), "remaining": .int(r.remaining),
            "resetAt": .string(UTCTimestamp.iso8601(epochSeconds: r.resetAt)),
        ]
    }
}
