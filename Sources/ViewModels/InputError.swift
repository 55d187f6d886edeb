/// An input the view model refused; nothing was changed.
///
/// The session layer maps `unknownInput` to 404 and `invalidValue` to 400; `detail` is the problem
/// document's `detail` text.
public enum InputError: Error, Equatable, Sendable {
    /// The view model has no input of that name; `known` lists the ones it has.
    case unknownInput(viewModel: String, input: String, known: [String])
    /// The value has the wrong type or lies outside the allowed set; `detail` says what was expected and
    /// what came, e.g. "expected a string, got a number".
    case invalidValue(viewModel: String, input: String, detail: String)

    /// A precise human sentence for a problem document's `detail`.
    public var detail: String {
        switch self {
        case .unknownInput(let viewModel, let input, let known):
            let list = known.isEmpty ? "it has no inputs" : "known inputs: " + known.joined(separator: ", ")
            return "view model '\(viewModel)' has no input '\(input)'; \(list)"
        case .invalidValue(let viewModel, let input, let detail):
            return "invalid value for '\(viewModel)/\(input)': \(detail)"
        }
    }
}
