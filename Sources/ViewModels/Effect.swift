import JSON

/// What a transition asks the `Store` to do after changing state: emit a signal now, or run some
/// asynchronous work whose result comes back as an action.
public struct Effect<Action: Sendable>: Sendable {
    enum Operation: Sendable {
        case signal(name: String, value: JSONValue)
        case run(@Sendable () async -> Action)
    }

    let operation: Operation

    /// A one-shot output (navigation and the like), sent in the same event as the transition's state
    /// changes; never part of a snapshot.
    public static func signal(_ name: String, _ value: JSONValue) -> Effect {
        Effect(operation: .signal(name: name, value: value))
    }

    /// Asynchronous work (I/O). It runs off the owner; its resulting action is applied on the owner with
    /// the `inputSeq` of the input that started it.
    public static func run(_ work: @escaping @Sendable () async -> Action) -> Effect {
        Effect(operation: .run(work))
    }
}
