import JSON

/// One view model's logic as a state machine, run by `Store`.
///
/// A feature is a value holding its dependencies (e.g. the search client); it has no mutable state
/// of its own. `reduce` is synchronous and pure: it changes the state and returns effects, and never
/// does I/O. Effects do the I/O and come back as actions.
public protocol ViewModelFeature: Sendable {
    /// The feature's whole state; outputs are functions of it. `Codable` so a session can be stored and
    /// restored (on this node or another): its stored names must stay stable (explicit `CodingKeys`).
    associatedtype State: Equatable, Codable
    /// Inputs named after events (`queryChanged`) plus effect results (`searchResponse`).
    associatedtype Action: Sendable

    /// The contract name: the view model's key in a snapshot, its SSE event name, its path segment.
    var name: String { get }
    /// The input names, in the contract's order.
    var inputNames: [String] { get }
    /// The state outputs, in snapshot order.
    var outputs: [Output<State>] { get }

    /// Turns a named input and its value into an action, without looking at or changing state.
    /// Throws `unknownInput` / `invalidValue` for anything the contract rejects.
    func action(forInput input: String, value: JSONValue) throws(InputError) -> Action

    /// The transition: applies `action` to `state` and returns the effects to run.
    func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>]

    /// The version of the stored form of `State`; raise it when a change cannot be read by older code
    /// or old data cannot be read by the new code. A restore refuses any other version.
    var stateVersion: Int { get }

    /// `state` as the JSON text stored for it, written by hand, or nil (the default) for `JSONEncoder`'s.
    /// For a state that changes on almost every input (cluster mode stores it on each commit; `JSONEncoder`
    /// is costly even for the greeting's two strings). Must parse to the value `JSONEncoder`
    /// writes for `state` (a test per feature checks it), so either reader restores it.
    func durableJSON(_ state: State) -> [UInt8]?

    /// Called once right after `state` was restored: returns the effects that were under way when it was
    /// stored (e.g. the search request being waited for) so they run again. A restored state carries no
    /// effect handle; this is the only way work resumes. Signals returned here are ignored.
    func resume(_ state: inout State) -> [Effect<Action>]

    /// The action, if any, that an application-wide notice (`ViewModel.receive`; e.g. an upstream's
    /// reachability and rate limit) means for this feature; called outside `reduce`, so it may read the
    /// clock. Nil by default: a feature ignores the notices it does not know.
    func action(for notice: any Sendable) -> Action?
}

extension ViewModelFeature {
    /// Version 1 unless a feature says otherwise.
    public var stateVersion: Int { 1 }

    /// `JSONEncoder`'s text unless a feature says otherwise.
    public func durableJSON(_ state: State) -> [UInt8]? { nil }

    /// Nothing resumes unless a feature says otherwise.
    public func resume(_ state: inout State) -> [Effect<Action>] { [] }

    /// Features ignore notices unless they say otherwise.
    public func action(for notice: any Sendable) -> Action? { nil }

    /// The error for an input name this feature does not have.
    public func unknownInput(_ input: String) -> InputError {
        .unknownInput(viewModel: name, input: input, known: inputNames)
    }
}
