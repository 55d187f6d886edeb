import JSON

/// The runtime of one view model: owns a feature's state, applies actions, runs effects, and reports
/// changed outputs and signals through `onEvent`.
///
/// Threading (the owner rule): a store has exactly one owner, the thread or event loop that created it.
/// `send`, `apply`, `snapshot`, `state` and `onEvent` are used on the owner only. Effects run in
/// unstructured tasks off the owner; their results come back through the `OwnerExecutor` and are
/// applied on the owner. No locks: one owner per piece of mutable state.
///
/// Observation: a single `onEvent` closure, called synchronously after each transition that changed an
/// output or emitted a signal. One observer is all the session layer needs (it fans out to streams
/// itself), a closure costs one indirect call, and no Combine/Observation/AsyncStream machinery (with its
/// allocations, hops and Foundation ties) sits on the hot path. Changes are found by comparing each
/// output's Swift value before and after the transition, so only changed outputs are encoded.
///
/// Re-entrancy: an action applied from inside `onEvent` is queued and applied after the current one,
/// so events are always reported in the order the transitions happened.
///
/// Cancellation: every effect's task is kept (on the owner) until its result comes back. An effect
/// made `cancellable(id:cancelInFlight:)` cancels the task under way with the same id; `Effect.cancel`
/// cancels it; `close()` cancels all and lets no new effect start. A cancelled task's action is
/// dropped on the owner, whatever it returns (the task is merely told, via Swift task cancellation, so
/// that its I/O can stop early).
public final class Store<Feature: ViewModelFeature>: ViewModel {
    /// The feature (logic and dependencies).
    public let feature: Feature
    /// The current state (read on the owner only).
    public private(set) var state: Feature.State
    // Two stores live in every session: the flags sit right after the state (in the bytes its
    // alignment would leave unused), and what most stores never need is allocated on demand (`lazyEffects`).
    private var isApplying = false
    /// True after `close()`: no effect starts any more.
    public private(set) var isClosed = false
    /// Counts the changes of what the stored form holds (the state, the effects under way and their
    /// `inputSeq`s), so a `StoredFormMemo` tells at once whether its bytes still describe this store.
    /// Declared here, it sits in the padding after the two flags: no byte more per store.
    private(set) var changes: UInt32 = 0
    /// The observer; see `ViewModel.onEvent`.
    public var onEvent: ((_ viewModel: String, _ event: ViewModelEvent) -> Void)?

    let executor: OwnerExecutor
    let outputs: [Output<Feature.State>]
    /// The effect bookkeeping and the re-entrant action queue, allocated with the first effect or
    /// queued action: most stores (every `greeting`, a `search` never used) never need one, and one
    /// reference is less per store than the five fields inline.
    private var lazyEffects: EffectState?

    private final class EffectState {
        /// Actions applied re-entrantly, as closures (a non-generic type keeps the common path free
        /// of runtime generic-metadata look-ups).
        var queued: [() -> Void] = []
        var bound: OwnerBound<Store>?
        /// Effect tasks under way, by a number unique in this store (owner only).
        var tasks: [Int: Task<Void, Never>] = [:]
        /// The task number of each cancellable effect under way, by id, with the `inputSeq` it reports
        /// under (owner only; a stored state remembers the `inputSeq`s so resumed work keeps them).
        var taskIDs: [EffectID: (number: Int, inputSeq: Int?)] = [:]
        var nextTask = 0
    }
    private var effectState: EffectState {
        if let lazyEffects { return lazyEffects }
        let made = EffectState()
        lazyEffects = made
        return made
    }
    /// A store running a feature that has no effects (using an executor would be a programming error).
    public convenience init(feature: Feature, initialState: Feature.State) {
        self.init(feature: feature, initialState: initialState, executor: noEffectsExecutor)
    }

    /// A store running `feature` from `initialState`; effect results are applied through `executor`.
    public init(feature: Feature, initialState: Feature.State, executor: @escaping OwnerExecutor) {
        self.feature = feature
        self.state = initialState
        self.executor = executor
        self.outputs = feature.outputs
    }

    /// The contract name.
    public var name: String { feature.name }

    /// The input names.
    public var inputNames: [String] { feature.inputNames }

    /// All state outputs in the feature's order.
    public var snapshot: JSONObject {
        JSONObject(outputs.map { ($0.name, $0.encode(state)) })
    }

    /// Validates the input (throwing before any change) and applies it.
    public func send(input: String, value: JSONValue, inputSeq: Int) throws(InputError) {
        let action = try feature.action(forInput: input, value: value)
        apply(action, inputSeq: inputSeq)
    }

    /// Applies what an application-wide notice means for this feature (`ViewModel`), on the owner.
    public func receive(_ notice: any Sendable) {
        if let action = feature.action(for: notice) { apply(action, inputSeq: nil) }
    }

    /// Applies an action on the owner and reports the resulting event, if any. `inputSeq` is the number
    /// of the session input that caused it (nil when no input did).
    public func apply(_ action: Feature.Action, inputSeq: Int?) {
        if isApplying {
            effectState.queued.append { [unowned self] in step(action, inputSeq: inputSeq) }
            return
        }
        isApplying = true
        defer { isApplying = false }
        step(action, inputSeq: inputSeq)
        while let lazyEffects, !lazyEffects.queued.isEmpty { lazyEffects.queued.removeFirst()() }
    }

    private func step(_ action: Feature.Action, inputSeq: Int?) {
        let old = state
        let effects = feature.reduce(&state, action)
        if state != old { changes &+= 1 }
        var changed = JSONObject()
        // Index loops, and no loop over no effects: in this generic code each iterator is a type whose
        // metadata the runtime looks up on every call.
        var i = 0
        while i < outputs.count {
            let output = outputs[i]
            i += 1
            guard output.changed(old, state) else { continue }
            if changed.isEmpty { changed.reserveCapacity(outputs.count) }
            changed.appendNew(output.name, output.encode(state))  // output names are distinct
        }
        var signals = JSONObject()
        var hasWork = false
        if !effects.isEmpty { scan(effects, signals: &signals, hasWork: &hasWork) }
        if !changed.isEmpty || !signals.isEmpty {
            onEvent?(feature.name, ViewModelEvent(inputSeq: inputSeq, outputs: changed, signals: signals))
        }
        guard hasWork else { return }
        for effect in effects {
            switch effect.operation {
            case .signal: break
            case .cancel(let id): cancel(id: id)
            case .run(let run, let id, let cancelInFlight):
                if let id, cancelInFlight { cancel(id: id) }
                launch(run, id: id, inputSeq: inputSeq)
            }
        }
    }

    /// The signals among `effects`, and whether any effect is work (run or cancel).
    private func scan(_ effects: [Effect<Feature.Action>], signals: inout JSONObject, hasWork: inout Bool) {
        for effect in effects {
            switch effect.operation {
            case .signal(let name, let value): signals[name] = value
            case .run, .cancel: hasWork = true
            }
        }
    }

    private func launch(_ run: @escaping @Sendable () async -> Feature.Action, id: EffectID?, inputSeq: Int?) {
        guard !isClosed else { return }
        let effects = effectState
        effects.nextTask += 1
        let number = effects.nextTask
        let handle = ownerBound
        let executor = self.executor
        effects.tasks[number] = Task {
            let action = await run()
            executor { handle.value?.finish(number, id: id, action, inputSeq: inputSeq) }
        }
        if let id {
            effects.taskIDs[id] = (number, inputSeq)
            changes &+= 1
        }
    }

    /// An effect's result on the owner: applied unless its task was cancelled meanwhile.
    private func finish(_ number: Int, id: EffectID?, _ action: Feature.Action, inputSeq: Int?) {
        // Cancelled meanwhile: dropped.
        guard let effects = lazyEffects, effects.tasks.removeValue(forKey: number) != nil else { return }
        if let id, effects.taskIDs[id]?.number == number {
            effects.taskIDs[id] = nil
            changes &+= 1
        }
        apply(action, inputSeq: inputSeq)
    }

    private func cancel(id: EffectID) {
        guard let effects = lazyEffects, let number = effects.taskIDs.removeValue(forKey: id)?.number else { return }
        changes &+= 1
        effects.tasks.removeValue(forKey: number)?.cancel()
    }

    /// The `inputSeq` of each cancellable effect under way, by id (owner only).
    var effectInputSeqs: [EffectID: Int?] { lazyEffects?.taskIDs.mapValues { $0.inputSeq } ?? [:] }

    /// Replaces the state with a restored one (owner only) and starts what the feature resumes, each
    /// effect reporting under the `inputSeq` stored for its id. Work under way is cancelled first: a
    /// restored state never carries an effect handle. Emits no event (the caller shows a snapshot).
    func replaceState(with restored: Feature.State, inputSeqs: [EffectID: Int]) {
        if let effects = lazyEffects {
            for task in effects.tasks.values { task.cancel() }
            effects.tasks = [:]
            effects.taskIDs = [:]
        }
        state = restored
        changes &+= 1
        for effect in feature.resume(&state) {
            switch effect.operation {
            case .signal: break
            case .cancel(let id): cancel(id: id)
            case .run(let run, let id, _): launch(run, id: id, inputSeq: id.flatMap { inputSeqs[$0] })
            }
        }
    }

    /// Effects under way (owner only; tests use it to see that superseded work was cancelled).
    public var runningEffects: Int { lazyEffects?.tasks.count ?? 0 }

    /// Tears the store down (owner only): cancels every effect under way, drops their results and
    /// starts no new effect. The session layer calls it when the session ends. Idempotent.
    public func close() {
        isClosed = true
        guard let effects = lazyEffects else { return }
        if !effects.taskIDs.isEmpty { changes &+= 1 }
        let running = effects.tasks
        effects.tasks = [:]
        effects.taskIDs = [:]
        for task in running.values { task.cancel() }
    }

    /// A weak, sendable handle to this store, to be dereferenced on the owner only.
    var ownerBound: OwnerBound<Store> {
        let effects = effectState
        if let bound = effects.bound { return bound }
        let made = OwnerBound(self)
        effects.bound = made
        return made
    }
}

/// An executor for features without effects: using it is a programming error.
let noEffectsExecutor: OwnerExecutor = { _ in
    preconditionFailure("this view model has no effects, so it has no executor")
}
