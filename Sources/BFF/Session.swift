import JSON
import ViewModels

/// One browser session: its view models, its event sequence, its recent history and the streams
/// that watch it.
///
/// Threading: owned by one event loop (`loop`, encoded in its id); every member is used there only.
/// Not `Sendable`, so the compiler keeps it there. Streams may live on other loops: frames reach them
/// through their own loop's `execute` (`runOrExecute`).
final class Session {
    let id: String
    unowned let home: SessionLoop
    /// This session's own view models, by contract name, in snapshot order (the shared `status`
    /// view model is added by `SessionLoop`).
    let viewModels: [ViewModel]
    private(set) var seq = 0
    private(set) var inputSeq = 0
    var history: SessionHistory
    var streams: [SessionStream] = []
    /// What other loops read without a hop: the idle clock and the encoded snapshot.
    let handle: SessionHandle
    /// Monotonic seconds of the last request or stream change (set from any loop through `handle`).
    var lastActivity: Double {
        get { handle.lastActivity }
        set { handle.lastActivity = newValue }
    }
    var bucket: TokenBucket
    private var idempotency: [String: (inputSeq: Int, at: Double)] = [:]
    var isEnded = false
    /// Cluster mode: takes each event instead of numbering and delivering it here (the store's
    /// commit numbers it and its feed delivers it to streams on every node).
    var eventSink: ((_ viewModel: String, _ data: [UInt8], _ isSignal: Bool) -> Void)?
    /// Told once when the session ends (cluster mode releases its lease).
    var onEnd: (() -> Void)?

    init(id: String, home: SessionLoop, viewModels: [ViewModel], now: Double) {
        self.id = id
        self.home = home
        self.viewModels = viewModels
        let c = home.app.configuration
        history = SessionHistory(maxEvents: c.historyEvents, maxBytes: c.historyBytes)
        bucket = TokenBucket(rate: c.inputRate, burst: c.inputBurst, now: now)
        handle = SessionHandle(id: id, now: now)
        // One closure for all of them (its context is one allocation per session).
        let observe: (String, ViewModelEvent) -> Void = { [unowned self] name, event in
            self.emit(viewModel: name, event)
        }
        for vm in viewModels { vm.onEvent = observe }
    }

    /// The snapshot: `{"seq", "viewModels": {name: state outputs}}`.
    var snapshot: JSONValue {
        var vms = JSONObject()
        for vm in viewModels { vms[vm.name] = .object(vm.snapshot) }
        vms["status"] = .object(home.statusSnapshot)
        return ["seq": .int(seq), "viewModels": .object(vms)]
    }

    /// The snapshot as an SSE frame.
    /// Uses the published snapshot when it is current, but does not publish one: an idle session
    /// with a stream then keeps no encoded copy (about 340 bytes each) until `GET /state` asks.
    var snapshotFrame: [UInt8] {
        let current = handle.snapshot.ownerValue(as: EncodedSnapshot.self).flatMap { $0.seq == seq ? $0.json : nil }
        return SSEFrame.event(id: seq, name: "snapshot", data: current ?? snapshot.bytes)
    }

    /// The snapshot's JSON for the current `seq`: encoded once per change and published in
    /// `handle` for readers on other loops (owner loop only).
    func encodedSnapshot() -> EncodedSnapshot {
        if let current = handle.snapshot.ownerValue(as: EncodedSnapshot.self), current.seq == seq { return current }
        let encoded = EncodedSnapshot(seq: seq, json: snapshot.bytes)
        if !isEnded { handle.snapshot.replace(with: encoded, retired: &home.retired, domain: home.app.hazards) }
        return encoded
    }

    /// Withdraws the published snapshot (it no longer matches `seq`).
    func snapshotChanged() {
        if !handle.snapshot.isEmpty {
            handle.snapshot.replace(with: nil, retired: &home.retired, domain: home.app.hazards)
        }
    }

    /// Publishes one view-model change: numbers it, frames it once, keeps it for replay, and hands
    /// it to every stream.
    func emit(viewModel: String, _ event: ViewModelEvent) {
        emit(viewModel: viewModel, data: Session.eventData(event), isSignal: !event.signals.isEmpty)
    }

    /// Publishes a change whose `data:` JSON is already encoded (a status change is encoded once per
    /// loop, not once per session).
    func emit(viewModel: String, data: [UInt8], isSignal: Bool) {
        guard !isEnded else { return }
        if let eventSink { return eventSink(viewModel, data, isSignal) }
        seq += 1
        snapshotChanged()
        let frame = SSEFrame.event(id: seq, name: viewModel, data: data)
        history.append(.init(seq: seq, frame: frame, isSignal: isSignal))
        home.app.metrics.events.increment()
        for stream in streams { stream.deliverFromSession(frame, isSignal: isSignal) }
    }

    /// Cluster mode: the counters as the store last committed them (after a restore or a commit).
    func adoptCommitted(seq: Int, inputSeq: Int? = nil) {
        if seq != self.seq {
            self.seq = seq
            snapshotChanged()
        }
        if let inputSeq { self.inputSeq = inputSeq }
    }

    /// The `data:` JSON of an event: `{"inputSeq", "outputs"?, "signals"?}`.
    static func eventData(_ event: ViewModelEvent) -> [UInt8] {
        var data: JSONObject = ["inputSeq": .optional(event.inputSeq)]
        if !event.outputs.isEmpty { data["outputs"] = .object(event.outputs) }
        if !event.signals.isEmpty { data["signals"] = .object(event.signals) }
        return data.bytes
    }

    /// Applies one input if the rate allows and it is valid; only an `accepted` input uses an `inputSeq`.
    func offer(viewModel name: String, input: String, value: JSONValue, idempotencyKey: String?, now: Double)
        -> InputOutcome
    {
        lastActivity = now
        if let key = idempotencyKey {
            if let seen = idempotency[key], now - seen.at < home.app.configuration.idempotencyWindow {
                return .duplicate(inputSeq: seen.inputSeq)
            }
        }
        if let wait = bucket.take(now: now) {
            return .rateLimited(
                retryAfterSeconds: max(1, Int(wait.rounded(.up))),
                inputsPerSecond: Int(home.app.configuration.inputRate))
        }
        guard let vm = viewModels.first(where: { $0.name == name }) else {
            if name == "status" { return .refused(.unknownInput(viewModel: "status", input: input, known: [])) }
            return .unknownViewModel(name: name, known: viewModels.map(\.name) + ["status"])
        }
        do {
            try vm.send(input: input, value: value, inputSeq: inputSeq + 1)
        } catch {
            return .refused(error)
        }
        inputSeq += 1
        home.app.metrics.inputs.increment()
        if let key = idempotencyKey { remember(key: key, inputSeq: inputSeq, now: now) }
        return .accepted(inputSeq: inputSeq)
    }

    private func remember(key: String, inputSeq: Int, now: Double) {
        let window = home.app.configuration.idempotencyWindow
        if idempotency.count >= 1024 { idempotency = idempotency.filter { now - $0.value.at < window } }
        if idempotency.count >= 1024, let oldest = idempotency.min(by: { $0.value.at < $1.value.at }) {
            idempotency[oldest.key] = nil
        }
        idempotency[key] = (inputSeq, now)
    }

    /// Ends the session: every stream gets `event: end` with `reason` and closes.
    func end(reason: String) {
        guard !isEnded else { return }
        isEnded = true
        handle.ended.store(true, ordering: .releasing)
        snapshotChanged()
        let frame = SSEFrame.event(id: nil, name: "end", json: ["reason": .string(reason)])
        for stream in streams { stream.endFromSession(frame) }
        streams.removeAll()
        for vm in viewModels {
            vm.onEvent = nil
            vm.close()  // cancels its effects: an ended session's searches must not spend GitHub's budget
        }
        onEnd?()
        onEnd = nil
        eventSink = nil
    }
}
