/// Who shares one instance of a registered view model.
public enum ViewModelScope: Sendable, Hashable {
    /// One instance per session: its own state, and the session's inputs go to it.
    case session
    /// One instance for the whole application (per node in a cluster, each fed the same notices), shown in
    /// every session's snapshot and stream. It takes no session inputs: it changes by the notices the
    /// application sends it (`ViewModel.receive`), e.g. an upstream's status.
    case app
}

/// The person a session belongs to, when one signed in: who they are, to show them, and the key of
/// their login, by which the application finds what is theirs (their token, their budget). The key is
/// opaque (a digest naming the login, never the browser's cookie nor any token).
public struct SignedInPerson: Sendable, Equatable, Codable {
    /// Names the login (the session's owner) without being its cookie.
    public let loginKey: String
    /// The account's stable id at the identity provider (GitHub's user id).
    public let userID: Int
    /// The account's handle, e.g. `octocat`.
    public let login: String
    /// The display name, when the account has one.
    public let name: String?
    /// The account's picture, an `https:` URL, when known.
    public let avatarURL: String?

    public init(loginKey: String, userID: Int, login: String, name: String?, avatarURL: String?) {
        self.loginKey = loginKey
        self.userID = userID
        self.login = login
        self.name = name
        self.avatarURL = avatarURL
    }
}

/// What a view model is made with when a session (or the application) starts.
public struct ViewModelContext: Sendable {
    /// Runs work on the view model's owner (its session's event loop): give it to `Store`.
    public let executor: OwnerExecutor
    /// The client (an opaque key such as an IP address) the session's upstream calls are charged to, for
    /// the fair-use rules; nil: nobody (an app-wide view model, a session taken over from another node).
    public let client: String?
    /// The signed-in person the session belongs to; nil: an anonymous session (or an app-wide view model).
    public let person: SignedInPerson?

    public init(executor: @escaping OwnerExecutor, client: String?, person: SignedInPerson? = nil) {
        self.executor = executor
        self.client = client
        self.person = person
    }
}

/// The view models an application hosts: each registered once, at the composition root, with its scope
/// and how to make it. The session layer makes a session's view models from here and names none of
/// them itself; a snapshot lists them in registration order.
///
/// ```swift
/// var viewModels = ViewModelRegistry()
/// viewModels.register(TodoFeature.self, initialState: .init()) { _ in TodoFeature() }
/// ```
///
/// Threading: a value; register before the application is built, then it is only read (any thread).
public struct ViewModelRegistry: Sendable {
    /// One registration: its scope and its maker.
    struct Registration: Sendable {
        let scope: ViewModelScope
        let make: @Sendable (ViewModelContext) -> any ViewModel
    }

    private(set) var registrations: [Registration] = []

    /// No view model yet.
    public init() {}

    /// Registers `Feature`: `make` builds the feature (its dependencies) for a context, run from
    /// `initialState` by a `Store`. `scope` says who shares an instance (default: one per session).
    public mutating func register<Feature: ViewModelFeature>(
        _ feature: Feature.Type, scope: ViewModelScope = .session,
        initialState: @escaping @Sendable @autoclosure () -> Feature.State,
        _ make: @escaping @Sendable (ViewModelContext) -> Feature
    ) {
        register(scope: scope) { context in
            Store(feature: make(context), initialState: initialState(), executor: context.executor)
        }
    }

    /// Registers a view model built by hand (any `ViewModel`, e.g. a `Store` whose feature type depends on
    /// the context).
    public mutating func register(
        scope: ViewModelScope = .session, _ make: @escaping @Sendable (ViewModelContext) -> any ViewModel
    ) {
        registrations.append(Registration(scope: scope, make: make))
    }

    /// True when something is registered in `scope`.
    public func has(_ scope: ViewModelScope) -> Bool { registrations.contains { $0.scope == scope } }

    /// New instances of every view model of `scope`, in registration order.
    public func make(_ scope: ViewModelScope, _ context: ViewModelContext) -> [any ViewModel] {
        // At its exact size: a session keeps this array, so a spare slot would cost every session its bytes.
        var out: [any ViewModel] = []
        out.reserveCapacity(registrations.reduce(0) { $1.scope == scope ? $0 + 1 : $0 })
        for r in registrations where r.scope == scope { out.append(r.make(context)) }
        return out
    }
}
