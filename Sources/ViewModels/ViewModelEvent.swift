import JSON

/// One change of one view model: the state outputs that changed and/or the signals it emitted.
///
/// A plain value; safe to send anywhere.
public struct ViewModelEvent: Equatable, Sendable {
    /// The input that caused the change (effects carry their starting input's number); `nil` for
    /// changes no session input caused (the shared `status` view model).
    public var inputSeq: Int?
    /// Changed state outputs, each with its whole new value (merge semantics), in output order.
    public var outputs: JSONObject
    /// One-shot outputs (`openURL`, `deselect`), never part of a snapshot.
    public var signals: JSONObject

    /// An event; at least one of `outputs` and `signals` should be non-empty.
    public init(inputSeq: Int?, outputs: JSONObject = [:], signals: JSONObject = [:]) {
        self.inputSeq = inputSeq
        self.outputs = outputs
        self.signals = signals
    }
}
