import JSON

/// What a transition asks the `Store` to do after changing state: emit a signal now, run some
/// asynchronous work whose result comes back as an action, or cancel work under way.
public struct Effect<Action: Sendable>: Sendable {
    enum Operation: Sendable {
        case signal(name: String, value: JSONValue)
        case run(@Sendable () async -> Action, id: EffectID?, cancelInFlight: Bool)
        case cancel(EffectID)
    }

    let operation: Operation

    /// A one-shot output (navigation and the like), sent in the same event as the transition's state
    /// changes; never part of a snapshot.
    public static func signal(_ name: String, _ value: JSONValue) -> Effect {
        Effect(operation: .signal(name: name, value: value))
    }

    /// Asynchronous work (I/O). It runs off the owner; its resulting action is applied on the owner with
    /// the `inputSeq` of the input that started it, unless the work was cancelled first.
    public static func run(_ work: @escaping @Sendable () async -> Action) -> Effect {
        Effect(operation: .run(work, id: nil, cancelInFlight: false))
    }

    /// Cancels the work under way with `id`, if any: its task is cancelled (Swift task cancellation,
    /// which the work may observe to stop early) and whatever action it still returns is dropped.
    public static func cancel(id: EffectID) -> Effect {
        Effect(operation: .cancel(id))
    }

    /// This effect, identified by `id` so that it can be cancelled (`Effect.cancel(id:)`, the store's
    /// `close()`); with `cancelInFlight`, starting it first cancels the work under way with the same id
    /// (as swift-composable-architecture's `cancellable(id:cancelInFlight:)`). Signals are not affected.
    public func cancellable(id: EffectID, cancelInFlight: Bool = false) -> Effect {
        guard case .run(let work, _, _) = operation else { return self }
        return Effect(operation: .run(work, id: id, cancelInFlight: cancelInFlight))
    }
}

/// The identity of cancellable work within one store (e.g. "search": a newer search replaces an older one).
public struct EffectID: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The name.
    public let name: String

    /// An id named `name`.
    public init(_ name: String) { self.name = name }

    /// An id written as a string literal.
    public init(stringLiteral value: String) { name = value }

    /// The name.
    public var description: String { name }
}
