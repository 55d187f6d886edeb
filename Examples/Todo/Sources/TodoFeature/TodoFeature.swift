import BFFKit
import Foundation

/// A todo list: inputs `add` (a title), `toggle` and `remove` (an item's id); outputs `items` (each
/// `{"id", "title", "done"}`) and `count` (the items not done). At most `limit` items, titles of 1 to 200
/// characters: anything else is refused with a precise error, before anything changes.
public struct TodoFeature: ViewModelFeature {
    public struct Item: Equatable, Codable, Sendable {
        public var id: Int
        public var title: String
        public var done: Bool
    }

    public struct State: Equatable, Codable, Sendable {
        public var items: [Item] = []
        public var nextID = 1
        public init() {}
    }

    public enum Action: Sendable {
        case add(String)
        case toggle(Int)
        case remove(Int)
    }

    /// The most items a list holds.
    public let limit: Int

    public init(limit: Int = 100) { self.limit = limit }

    public var name: String { "todo" }
    public var inputNames: [String] { ["add", "toggle", "remove"] }
    public var outputs: [Output<State>] {
        [
            Output("items", { $0.items }, encode: TodoFeature.encode),
            .int("count") { $0.items.filter { !$0.done }.count },
        ]
    }

    /// `items` as JSON: `[{"id", "title", "done"}]`.
    static func encode(_ items: [Item]) -> JSONValue {
        .array(items.map { ["id": .int($0.id), "title": .string($0.title), "done": .bool($0.done)] })
    }

    public func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
        let v = InputValue(viewModel: name, input: input, value: value)
        switch input {
        case "add":
            let title = try v.string().trimmingCharacters(in: .whitespaces)
            guard (1...200).contains(title.count) else { throw v.invalid("expected a title of 1 to 200 characters") }
            return .add(title)
        case "toggle": return .toggle(try v.integer("an item id"))
        case "remove": return .remove(try v.integer("an item id"))
        default: throw unknownInput(input)
        }
    }

    public func reduce(_ state: inout State, _ action: Action) -> [Effect<Action>] {
        switch action {
        case .add(let title):
            guard state.items.count < limit else { return [.signal("full", .int(limit))] }
            state.items.append(Item(id: state.nextID, title: title, done: false))
            state.nextID += 1
        case .toggle(let id):
            if let i = state.items.firstIndex(where: { $0.id == id }) { state.items[i].done.toggle() }
        case .remove(let id):
            state.items.removeAll { $0.id == id }
        }
        return []
    }
}
