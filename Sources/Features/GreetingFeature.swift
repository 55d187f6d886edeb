import JSON
import ViewModels

/// The `greeting` view model's logic: a text field, a button enabled when the name is not empty, and a
/// label that shows "Hello, NAME!" (upper-cased) once the button is pressed.
///
/// A pure value; run it with `GreetingViewModel` (a `Store`), on that store's owner.
public struct GreetingFeature: ViewModelFeature {
    /// The greeter's state.
    public struct State: Equatable, Sendable, Codable {
        /// The text field's content.
        public var name: String
        /// The label; nil until greeted.
        public var label: String?

        /// The stored names (durable state); explicit so a rename cannot change them.
        enum CodingKeys: String, CodingKey {
            case name, label
        }

        /// The button is enabled when the name is not empty.
        public var buttonEnabled: Bool { !name.isEmpty }

        /// The initial state: empty name, no label.
        public init(name: String = "", label: String? = nil) {
            self.name = name
            self.label = label
        }
    }

    /// The greeter's inputs.
    public enum Action: Sendable, Equatable {
        /// The `name` input: the text field changed.
        case nameChanged(String)
        /// The `greet` input: the button was pressed (a no-op while it is disabled).
        case greetTapped
    }

    /// The feature (it has no dependencies).
    public init() {}

    /// The contract name.
    public var name: String { "greeting" }
    /// The input names, in the contract's order.
    public var inputNames: [String] { ["name", "greet"] }
    /// The state outputs, in snapshot order.
    public var outputs: [Output<State>] {
        [.bool("buttonEnabled") { $0.buttonEnabled }, .optionalString("label") { $0.label }]
    }

    /// The stored state by hand: `{"name":…}` plus `"label":…` when there is one, as `JSONEncoder` writes
    /// it (a nil optional is left out). Stored on every commit in cluster mode (`ViewModelFeature`).
    public func durableJSON(_ state: State) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(24 + state.name.utf8.count + (state.label?.utf8.count ?? 0))
        out.append(contentsOf: #"{"name":"#.utf8)
        JSONValue.writeString(state.name, into: &out)
        if let label = state.label {
            out.append(contentsOf: #","label":"#.utf8)
            JSONValue.writeString(label, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Parses a named input into an action (see `ViewModelFeature`).
    public func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
        let v = InputValue(viewModel: name, input: input, value: value)
        switch input {
        case "name": return .nameChanged(try v.string())
        case "greet":
            try v.none()
            return .greetTapped
        default: throw unknownInput(input)
        }
    }

    /// The transition (see `ViewModelFeature`).
    public func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>] {
        switch action {
        case .nameChanged(let name):
            state.name = name
        case .greetTapped:
            guard state.buttonEnabled else { return [] }
            state.label = "Hello, \(state.name.uppercased())!"
        }
        return []
    }
}
