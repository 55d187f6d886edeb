import EventHTTP
import JSON
import ViewModels

/// One browser session: its view models, its event sequence, its recent history and the streams
/// that watch it.
///
/// Threading: owned by one event loop (`loop`, encoded in its id); every member is used there only.
/// Not `Sendable`, so the compiler keeps it there. Streams may live on other loops: frames reach them
/// through their own loop's `execute` (`runOrExecute`).
///
/// Memory: one per session, so what every session has the same (history and rate bounds) is read from
/// the configuration, cluster mode's custodian and the idempotency keys take a word each (no keys
/// allocate nothing), the id and the ended flag are kept once (in `handle`), and the first
/// stream needs no array. Its size sits at the top of a glibc malloc chunk, so one more stored word costs
/// every session a whole size class (`MODE=single bench/massif-streams.sh` shows it).
final class Session {
    /// The session's id (kept once, in `handle`).
    var id: String { handle.id }
    unowned let owner: LoopSessions
    /// This session's own view models, by contract name, in snapshot order (the app-wide view models
    /// are added from `LoopSessions`).
    let viewModels: [ViewModel]
    private(set) var seq = 0
    private(set) var inputSeq = 0
    var history = SessionHistory()
    var streams = SessionStreams()
    /// What other loops read without a hop: the idle clock and the encoded snapshot.
    let handle: SessionHandle
    /// Monotonic seconds of the last request or stream change (set from any loop through `handle`).
    var lastActivity: Double {
        get { handle.lastActivity }
        set { handle.lastActivity = newValue }
    }
    var bucket: TokenBucket
    /// The client whose per-client limits count this session (nil: not counted here, e.g. taken over
    /// from another node), released when it ends.
    let countedClient: ClientAddress?
    /// Received an input or opened a stream (an unused session expires early: `--unused-session-timeout`).
    /// Beside `countedClient`: in its padding.
    var used = false
    /// Monotonic seconds when this process started running it: an unused session expires this long after
    /// it whatever reads it saw (`GET /state` is no use: only inputs and streams are).
    let startedAt: Double
    /// Cluster mode: takes each event instead of numbering and delivering it here (the store's commit
    /// numbers it and its feed delivers it to streams on every node), and is told once when the session
    /// ends (it releases the lease). Kept until then. One word (`SessionCustodian` is a class).
    var custodian: SessionCustodian?
    /// The `Idempotency-Key`s of recent inputs, with the `inputSeq` each got and when (one word; nil, no
    /// allocation, until a keyed input comes and again once the last key expired).
    private var idempotency: IdempotencyMemory?
    /// The key of the login the session belongs to (nil: anonymous), kept in `handle`.
    var login: String? { handle.login }
    /// True once the session ended (kept in `handle`, which other loops read).
    var isEnded: Bool { handle.ended.load(ordering: .relaxed) }

    init(
        id: String, owner: LoopSessions, viewModels: [ViewModel], now: Double, client: ClientAddress? = nil,
        person: SignedInPerson? = nil
    ) {
        self.owner = owner
        countedClient = client
        self.viewModels = viewModels
        bucket = TokenBucket(burst: owner.env.configuration.inputBurst, now: now)
        handle = SessionHandle(id: id, now: now, owner: person.map(SessionOwner.init))
        startedAt = now
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
        vms.merge(owner.appWide)
        return ["seq": .int(seq), "viewModels": .object(vms)]
    }

    /// The snapshot as an SSE frame.
    /// Uses the published snapshot when it is current, but does not publish one: an idle session
    /// with a stream then keeps no encoded copy until `GET /state` asks.
    var snapshotFrame: [UInt8] {
        let current = handle.snapshot.ownerValue(as: EncodedSnapshot.self).flatMap { $0.seq == seq ? $0.json : nil }
        return SSEFrame.event(id: seq, name: "snapshot", data: current ?? snapshot.bytes)
    }

    /// The snapshot's JSON for the current `seq`: encoded once per change and published in
    /// `handle` for readers on other loops (owner loop only).
    func encodedSnapshot() -> EncodedSnapshot {
        if let current = handle.snapshot.ownerValue(as: EncodedSnapshot.self), current.seq == seq { return current }
        let encoded = EncodedSnapshot(seq: seq, json: snapshot.bytes)
        if !isEnded { handle.snapshot.replace(with: encoded, retired: &owner.retired, domain: owner.env.hazards) }
        return encoded
    }

    /// Withdraws the published snapshot (it no longer matches `seq`).
    func snapshotChanged() {
        if !handle.snapshot.isEmpty {
            handle.snapshot.replace(with: nil, retired: &owner.retired, domain: owner.env.hazards)
        }
    }

    /// Publishes one view-model change: numbers it, frames it once, keeps it for replay, and hands
    /// it to every stream.
    func emit(viewModel: String, _ event: ViewModelEvent) {
        let isSignal = !event.signals.isEmpty
        guard !isEnded else { return }
        if custodian != nil { return emit(viewModel: viewModel, data: Session.eventData(event), isSignal: isSignal) }
        // The data is written into the frame itself: one buffer per event, not two.
        seq += 1
        let frame = SSEFrame.event(id: seq, name: viewModel, capacity: 96) { Session.writeEventData(event, into: &$0) }
        publish(frame, isSignal: isSignal)
    }

    /// Publishes a change whose `data:` JSON is already encoded (a status change is encoded once per
    /// loop, not once per session).
    func emit(viewModel: String, data: [UInt8], isSignal: Bool) {
        guard !isEnded else { return }
        if let custodian { return custodian.sessionEmitted(viewModel: viewModel, data: data, isSignal: isSignal) }
        seq += 1
        publish(SSEFrame.event(id: seq, name: viewModel, data: data), isSignal: isSignal)
    }

    /// Keeps the frame of event `seq` (just numbered) for replay and hands it to every stream.
    private func publish(_ frame: [UInt8], isSignal: Bool) {
        snapshotChanged()
        let c = owner.env.configuration
        history.append(
            .init(seq: seq, frame: frame, isSignal: isSignal), maxEvents: c.historyEvents, maxBytes: c.historyBytes)
        owner.env.metrics.events.increment()
        for stream in streams {
            stream.run(with: (frame, isSignal)) { stream, e in stream.deliverFromSession(e.0, isSignal: e.1) }
        }
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
    /// Written straight into one buffer (the per-input path: no object built to be serialized).
    static func eventData(_ event: ViewModelEvent) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96)
        writeEventData(event, into: &out)
        return out
    }

    /// Appends an event's `data:` JSON (`eventData`) to `out`.
    static func writeEventData(_ event: ViewModelEvent, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"inputSeq":"#.utf8)
        if let n = event.inputSeq { JSONValue.writeInt(n, into: &out) } else { out.append(contentsOf: "null".utf8) }
        if !event.outputs.isEmpty {
            out.append(contentsOf: #","outputs":"#.utf8)
            event.outputs.write(into: &out)
        }
        if !event.signals.isEmpty {
            out.append(contentsOf: #","signals":"#.utf8)
            event.signals.write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Applies one input if the rate allows and it is valid; only an `accepted` input uses an `inputSeq`.
    func offer(viewModel name: String, input: String, value: JSONValue, idempotencyKey: String?, now: Double)
        -> InputOutcome
    {
        lastActivity = now
        used = true
        if let key = idempotencyKey,
            let seen = idempotency?.inputSeq(of: key, now: now, window: owner.env.configuration.idempotencyWindow)
        {
            return .duplicate(inputSeq: seen)
        }
        let c = owner.env.configuration
        if let wait = bucket.take(now: now, rate: c.inputRate, burst: c.inputBurst) {
            return .rateLimited(
                retryAfterSeconds: max(1, Int(wait.rounded(.up))),
                inputsPerSecond: Int(owner.env.configuration.inputRate))
        }
        guard let vm = viewModels.first(where: { $0.name == name }) else {
            // An app-wide view model takes no session input.
            if owner.appWide[name] != nil { return .refused(.unknownInput(viewModel: name, input: input, known: [])) }
            return .unknownViewModel(name: name, known: viewModels.map(\.name) + owner.appWide.keys)
        }
        do {
            try vm.send(input: input, value: value, inputSeq: inputSeq + 1)
        } catch {
            return .refused(error)
        }
        inputSeq += 1
        owner.env.metrics.inputs.increment()
        if let key = idempotencyKey { remember(key: key, inputSeq: inputSeq, now: now) }
        return .accepted(inputSeq: inputSeq)
    }

    /// The most idempotency keys a session remembers: with more in the window, the oldest is forgotten.
    static let rememberedKeys = 1024

    /// True when every key seen within the idempotency window before `now` is remembered: none was
    /// forgotten to make room, or every one forgotten has expired since. A key not remembered then was not
    /// offered to this session object within the window (cluster mode does not look it up in the store).
    func remembersEveryRecentKey(now: Double) -> Bool {
        guard let idempotency else { return true }
        return now >= idempotency.forgottenUntil
    }

    /// Keys kept now; nil when the session holds no memory of keys at all (tests).
    var rememberedKeyCount: Int? { idempotency?.count }

    /// Drops the keys whose window passed, and the whole memory once none is left (the loop's sweep).
    func forgetExpiredKeys(now: Double) {
        guard let memory = idempotency else { return }
        memory.dropExpired(now: now, window: owner.env.configuration.idempotencyWindow)
        if memory.count == 0, now >= memory.forgottenUntil { idempotency = nil }
    }

    private func remember(key: String, inputSeq: Int, now: Double) {
        let memory = idempotency ?? IdempotencyMemory()
        idempotency = memory
        memory.remember(
            key, inputSeq: inputSeq, now: now, window: owner.env.configuration.idempotencyWindow,
            cap: Session.rememberedKeys)
    }

    /// Ends the session: every stream gets `event: end` with `reason` and closes.
    func end(reason: String) {
        guard !isEnded else { return }
        handle.ended.store(true, ordering: .releasing)
        snapshotChanged()
        let frame = SSEFrame.event(id: nil, name: "end", json: ["reason": .string(reason)])
        for stream in streams { stream.run(with: frame) { stream, frame in stream.finish(with: frame) } }
        streams = SessionStreams()
        for vm in viewModels {
            vm.onEvent = nil
            vm.close()  // cancels its effects: an ended session's searches must not spend GitHub's budget
        }
        let custodian = self.custodian
        self.custodian = nil
        custodian?.sessionEnded(reason: reason)
    }
}

/// Who takes a session's events and hears of its end instead of the session itself (cluster mode: the
/// `OwnedSession` that runs it under a lease). One reference instead of two closures per session, and a
/// class, not a protocol, so that the session keeps it in one word and without an out-of-line box (less
/// memory per owned session). The base does nothing; `OwnedSession` overrides both.
class SessionCustodian {
    /// An event the session emitted (owner loop).
    func sessionEmitted(viewModel: String, data: [UInt8], isSignal: Bool) {}
    /// The session ended, for `reason` (owner loop; once).
    func sessionEnded(reason: String) {}
}

/// A session's open streams (`SessionStreams`): almost always none or one, so the first is held inline
/// and only a second one allocates an array (docs/BENCHMARKS.md, memory per session). Each is
/// a `LoopBoundReference` reference: the stream lives on its connection's loop, which may not be the session's.
typealias SessionStreams = InlineFirstList<LoopBoundReference<any SessionEventSink>>

/// A list whose first element is held inline and the others in an array: no allocation for a list of
/// none or one, and the order, count and removal of an array.
///
/// Threading: a value; used where its owner is (a session's on the session's loop).
struct InlineFirstList<Element>: Sequence {
    /// The first element (nil when empty).
    private(set) var first: Element?
    private var more: [Element] = []

    init() {}

    var count: Int { first == nil ? 0 : 1 + more.count }
    var isEmpty: Bool { first == nil }

    mutating func append(_ element: Element) {
        if first == nil { first = element } else { more.append(element) }
    }

    /// Removes every element for which `shouldRemove` is true, keeping the others in order.
    mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        var kept = InlineFirstList()
        for s in self where !shouldRemove(s) { kept.append(s) }
        self = kept
    }

    func makeIterator() -> Iterator { Iterator(first: first, more: more.makeIterator()) }

    /// The first element, then the others (no allocation: events are delivered through it).
    struct Iterator: IteratorProtocol {
        fileprivate var first: Element?
        fileprivate var more: IndexingIterator<[Element]>

        mutating func next() -> Element? {
            if let f = first {
                first = nil
                return f
            }
            return more.next()
        }
    }
}
