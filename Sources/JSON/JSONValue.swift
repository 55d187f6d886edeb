/// JSON: a small, fast JSON value type shared by every layer.
///
/// `JSONValue` is the currency between the view models (outputs and input values), the
/// session layer (snapshots and events) and the HTTP layer (problem documents). It has a
/// strict parser (`JSONValue.parse`) with precise error positions and a serializer that
/// writes straight into a byte array, with no Foundation on the hot path.
///
/// Objects keep insertion order so that snapshots and events read the same way every time.

/// A JSON value.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The string, if this is a string.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The integer, if this is an integer (or a double with an exact integer value).
    public var intValue: Int? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int(d)
        default: return nil
        }
    }
    /// The boolean, if this is a boolean.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The object, if this is an object.
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    /// The array, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    /// True for `null`.
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// A short name of the value's type, for error messages ("a string", "an object").
    public var typeDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// Member lookup on objects; `nil` for other values or a missing key.
    public subscript(key: String) -> JSONValue? { objectValue?[key] }
}

/// An insertion-ordered JSON object. Equality ignores order, as JSON does.
public struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    /// The members in insertion order.
    public private(set) var entries: [(key: String, value: JSONValue)]

    /// An empty object.
    public init() { entries = [] }
    /// An object with the given members, in order (later duplicates replace earlier ones).
    public init(_ entries: [(String, JSONValue)]) {
        self.entries = []
        self.entries.reserveCapacity(entries.count)
        for (k, v) in entries { self[k] = v }
    }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(elements) }

    /// Number of members.
    public var count: Int { entries.count }
    /// True when the object has no members.
    public var isEmpty: Bool { entries.isEmpty }
    /// The keys in order.
    public var keys: [String] { entries.map(\.key) }

    /// Gets or sets a member; setting `nil` removes it. Setting keeps the member's position.
    public subscript(key: String) -> JSONValue? {
        get {
            for e in entries where e.key == key { return e.value }
            return nil
        }
        set {
            if let i = entries.firstIndex(where: { $0.key == key }) {
                if let newValue { entries[i].value = newValue } else { entries.remove(at: i) }
            } else if let newValue {
                entries.append((key, newValue))
            }
        }
    }

    /// Appends member `key`, which the object must not have yet (no search: for callers whose keys are
    /// distinct, like a feature's output names).
    public mutating func appendNew(_ key: String, _ value: JSONValue) {
        assert(self[key] == nil, "appendNew: \(key) is a member already")
        entries.append((key, value))
    }

    /// Makes room for `count` members.
    public mutating func reserveCapacity(_ count: Int) { entries.reserveCapacity(count) }

    /// Merges `other` into this object; members of `other` win.
    public mutating func merge(_ other: JSONObject) {
        for (k, v) in other.entries { self[k] = v }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.entries.count == rhs.entries.count else { return false }
        for (k, v) in lhs.entries where rhs[k] != v { return false }
        return true
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue {
    /// `.string(s)` or `.null` for nil.
    public static func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
    /// `.int(i)` or `.null` for nil.
    public static func optional(_ i: Int?) -> JSONValue { i.map(JSONValue.int) ?? .null }
}
