import ViewModels

/// What became of one input offered to a session, in the session's terms (no HTTP): the route maps it to
/// a status and a problem document (`Application.response(to:sessionID:)`), and cluster mode will map the
/// same outcomes from a remote owner.
///
/// Only `accepted` consumed an `inputSeq`; `duplicate` repeats one given earlier; every other case
/// changed nothing.
enum InputOutcome: Equatable, Sendable {
    /// The input was applied under this number.
    case accepted(inputSeq: Int)
    /// The `Idempotency-Key` was seen within its window: the input was not applied again, and this is the
    /// number it got the first time.
    case duplicate(inputSeq: Int)
    /// The session's token bucket is empty: retry after this many whole seconds. `inputsPerSecond` is the
    /// configured rate, for the explanation.
    case rateLimited(retryAfterSeconds: Int, inputsPerSecond: Int)
    /// The session has no view model `name`; `known` lists those it has (the shared `status` included).
    case unknownViewModel(name: String, known: [String])
    /// The view model refused the input (no such input, or a value of the wrong type or out of range).
    case refused(InputError)
}
