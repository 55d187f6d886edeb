import GitHubSearch
import JSON
import ViewModels

/// The `account` view model's logic: who the session belongs to. One per session, no inputs: it is made
/// with the session's person (or none), and follows that person's own GitHub budget
/// (`PersonalUpstreamStatus`, posted to their sessions only).
///
/// A pure value; run it with a `Store`, on that store's owner.
public struct AccountFeature: ViewModelFeature {
    /// Who is signed in, and their budget.
    public struct State: Equatable, Sendable, Codable {
        /// Sign-in is configured on this server (the page offers "Sign in with GitHub").
        public var signInEnabled: Bool
        /// The person; nil while anonymous.
        public var person: SignedInPerson?
        /// The person's own GitHub rate limit; nil while anonymous or until known.
        public var rateLimit: RateLimit?

        /// The stored names (durable state); explicit so a rename cannot change them.
        enum CodingKeys: String, CodingKey {
            case signInEnabled, person, rateLimit
        }

        public init(signInEnabled: Bool, person: SignedInPerson? = nil, rateLimit: RateLimit? = nil) {
            self.signInEnabled = signInEnabled
            self.person = person
            self.rateLimit = rateLimit
        }
    }

    /// The only action: the person's budget was reported (not a session input).
    public enum Action: Sendable, Equatable {
        case budgetReported(RateLimit?)
    }

    /// The feature (it has no dependencies).
    public init() {}

    /// The contract name.
    public var name: String { "account" }
    /// No inputs: signing in and out are the `/auth/…` routes, not inputs.
    public var inputNames: [String] { [] }
    /// The state outputs, in snapshot order.
    public var outputs: [Output<State>] {
        [
            .bool("signInEnabled") { $0.signInEnabled },
            .bool("signedIn") { $0.person != nil },
            .optionalString("login") { $0.person?.login },
            .optionalString("name") { $0.person?.name },
            .optionalString("avatarUrl") { $0.person?.avatarURL },
            Output(
                "rateLimit", { $0.rateLimit.map(StatusFeature.ShownRateLimit.init) }, encode: StatusFeature.encode),
        ]
    }

    /// The person's `PersonalUpstreamStatus` (only an anonymous session's account ignores it).
    public func action(for notice: any Sendable) -> Action? {
        (notice as? PersonalUpstreamStatus).map { .budgetReported($0.status.rateLimit) }
    }

    /// Every input is unknown.
    public func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
        throw unknownInput(input)
    }

    /// The transition (see `ViewModelFeature`).
    public func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>] {
        switch action {
        case .budgetReported(let rateLimit):
            guard state.person != nil, let rateLimit else { return [] }
            state.rateLimit = rateLimit
        }
        return []
    }
}
