import JSON

/// Decoding of input values into Swift values, throwing precise `InputError`s (used by the features'
/// `action(forInput:value:)`; pure functions).
public struct InputValue: Sendable {
    /// The view model's contract name, for errors.
    public let viewModel: String
    /// The input's name, for errors.
    public let input: String
    /// The raw value.
    public let value: JSONValue

    /// The value of `input` sent to `viewModel`.
    @inlinable
    public init(viewModel: String, input: String, value: JSONValue) {
        self.viewModel = viewModel
        self.input = input
        self.value = value
    }

    /// An `invalidValue` error for this input, saying `detail`.
    @inlinable
    public func invalid(_ detail: String) -> InputError {
        .invalidValue(viewModel: viewModel, input: input, detail: detail)
    }

    /// A string value.
    @inlinable
    public func string() throws(InputError) -> String {
        guard case .string(let s) = value else { throw invalid("expected a string, got \(value.typeDescription)") }
        return s
    }

    /// An integer value (a number with an exact integer value).
    @inlinable
    public func integer(_ what: String = "an integer") throws(InputError) -> Int {
        guard let i = value.intValue else {
            let got: String
            if case .double = value { got = "a non-integer number" } else { got = value.typeDescription }
            throw invalid("expected \(what), got \(got)")
        }
        return i
    }

    /// One of a fixed set of strings, converted by `make`.
    @inlinable
    public func oneOf<T: RawRepresentable & CaseIterable>(_ type: T.Type) throws(InputError) -> T
    where T.RawValue == String {
        if case .string(let s) = value, let v = T(rawValue: s) { return v }
        // the list of allowed values is built only for the error, not on every valid input
        let allowed = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        guard case .string(let s) = value else {
            throw invalid("expected one of \(allowed), got \(value.typeDescription)")
        }
        throw invalid("expected one of \(allowed), got \"\(s)\"")
    }

    /// No value: absent (`null`) or an empty object.
    @inlinable
    public func none() throws(InputError) {
        switch value {
        case .null: return
        case .object(let o) where o.isEmpty: return
        default: throw invalid("takes no value (send an empty body or {}), got \(value.typeDescription)")
        }
    }
}
