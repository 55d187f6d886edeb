/// ViewModels: the kit a view model is written with — the feature protocol, the store that runs one,
/// effects, outputs, input validation, the stored form — and how an application registers its view
/// models (`ViewModelRegistry`). No view model of the product lives here (they are in `Features`).
///
/// The module's one job is the view-model runtime: inputs come in as named JSON values, outputs leave
/// as JSON through one observer callback. It knows nothing of HTTP, SSE framing, sessions or threads
/// beyond "an owner" (see `OwnerExecutor`), and nothing of any upstream service.
///
/// Each feature is a `ViewModelFeature`: an `Equatable` state, an action enum, a synchronous pure
/// transition that returns effects, and a list of outputs. `Store` runs a feature: it applies actions,
/// runs effects, diffs the outputs after every transition and reports the changes as `ViewModelEvent`s.
import JSON

/// The type-erased interface the session layer uses to drive any view model.
///
/// Threading: a view model has one owner (a thread or event loop); every member is called on the
/// owner only, and `onEvent` is called on the owner. Effects that finish elsewhere hop back to the
/// owner through the `OwnerExecutor` given at construction.
public protocol ViewModel: AnyObject {
    /// The contract name (`ViewModelFeature.name`).
    var name: String { get }
    /// Input names this view model accepts, in the contract's order (for 404 details and OpenAPI).
    var inputNames: [String] { get }
    /// All state outputs (never signals), in a stable order.
    var snapshot: JSONObject { get }
    /// Validates and applies one input. Throws before changing anything when the input is unknown or the
    /// value has the wrong type or is outside the allowed set; the caller then does not consume `inputSeq`.
    /// Inputs that take no value accept `.null` (absent) or an empty object.
    func send(input: String, value: JSONValue, inputSeq: Int) throws(InputError)
    /// Called synchronously on the owner for every change: only changed state outputs (whole new values,
    /// merge semantics) and/or signals, with the `inputSeq` of the input that caused it (effects carry the
    /// `inputSeq` of the input that started them). Never called with both maps empty. The first argument is
    /// the view model's `name`, so that one closure can observe several view models (a session gives all of
    /// its view models the same one: one closure context per session instead of one per view model).
    var onEvent: ((_ viewModel: String, _ event: ViewModelEvent) -> Void)? { get set }
    /// Something the whole application learnt (a notice: e.g. an upstream's status changed, or a session
    /// starts while it is not the default): the view model applies what it means for it, e.g. `search`
    /// stops offering searches while rate limited. Events it causes carry `inputSeq` nil.
    func receive(_ notice: any Sendable)
    /// Tears the view model down when its session ends: work under way (searches) is cancelled and its
    /// results are dropped; no new work starts. Idempotent.
    func close()
    /// The view model's state in a stored form that `restore(from:)` reads back, here or on another node:
    /// a versioned envelope around the `Codable` state (see `Store.durableState`). No handles of work
    /// under way are stored.
    var durableState: JSONValue { get }
    /// Replaces the state with a stored one and resumes the work that was under way (a loading search
    /// issues its request again). Throws before changing anything for malformed input or another version.
    func restore(from durable: JSONValue) throws(DurableStateError)
    /// Makes `memo` describe this view model now (`StoredFormMemo.refresh`): encodes only when it changed.
    func refreshStoredForm(_ memo: StoredFormMemo)
}
