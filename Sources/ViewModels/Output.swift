import JSON

/// One state output of a feature: its contract name, how to tell whether it changed between two states,
/// and how to encode it.
///
/// Changes are detected on the Swift value (`Equatable`), so only outputs that really changed are
/// encoded to JSON after a transition. Array equality short-cuts on shared storage, so an untouched
/// result list costs almost nothing to compare.
public struct Output<State>: Sendable {
    /// The output's contract name.
    public let name: String
    @usableFromInline let changed: @Sendable (State, State) -> Bool
    @usableFromInline let encode: @Sendable (State) -> JSONValue

    /// An output whose value is `get(state)`, encoded by `encode`.
    @inlinable
    public init<Value: Equatable & Sendable>(
        _ name: String, _ get: @escaping @Sendable (State) -> Value,
        encode: @escaping @Sendable (Value) -> JSONValue
    ) {
        self.name = name
        self.changed = { get($0) != get($1) }
        self.encode = { encode(get($0)) }
    }
}

extension Output {
    /// A string output.
    @inlinable
    public static func string(_ name: String, _ get: @escaping @Sendable (State) -> String) -> Output {
        Output(name, get, encode: JSONValue.string)
    }

    /// A string-or-null output.
    @inlinable
    public static func optionalString(_ name: String, _ get: @escaping @Sendable (State) -> String?) -> Output {
        Output(name, get, encode: JSONValue.optional)
    }

    /// A boolean output.
    @inlinable
    public static func bool(_ name: String, _ get: @escaping @Sendable (State) -> Bool) -> Output {
        Output(name, get, encode: JSONValue.bool)
    }

    /// An integer output.
    @inlinable
    public static func int(_ name: String, _ get: @escaping @Sendable (State) -> Int) -> Output {
        Output(name, get, encode: JSONValue.int)
    }
}
