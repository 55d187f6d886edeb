/// Why a view model refused to restore durable state; the view model was left unchanged.
public enum DurableStateError: Error, Equatable, Sendable {
    /// The stored value is not this view model's envelope, or its `state` does not decode;
    /// `detail` names the field and what was wrong.
    case malformed(viewModel: String, detail: String)
    /// The envelope was written by a version of the state this build does not read.
    case unsupportedVersion(viewModel: String, found: Int, supported: Int)

    /// A precise human sentence (for logs).
    public var detail: String {
        switch self {
        case .malformed(let viewModel, let detail):
            return "durable state of '\(viewModel)' is malformed: \(detail)"
        case .unsupportedVersion(let viewModel, let found, let supported):
            return "durable state of '\(viewModel)' has version \(found); this build reads version \(supported)"
        }
    }
}
