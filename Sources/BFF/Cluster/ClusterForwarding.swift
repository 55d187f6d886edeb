import EventHTTP
import JSON
import RedisClient

/// An input that reached a node not holding the session's live lease, forwarded through Redis to the
/// owner: `SPUBLISH <prefix>:s:{id}:in` (sharded, in the session's slot: the owner subscribes while it
/// runs the session; on a cluster the message crosses only that shard), and the owner's answer comes back
/// on the sender loop's own sharded reply channel (`<prefix>:reply:{<holder>}`) once the input is
/// committed (and, with replica acks, confirmed).
/// Wire form: `ForwardWire` (`fi1`), fields flags (`d` a delete, `k` a key follows), session, view
/// model, input, Idempotency-Key (empty without `k`), reply channel, correlation, value (JSON).
struct ForwardedInput {
    /// True for a forwarded `DELETE` (the other fields are then empty).
    var isDelete = false
    var sessionID: String
    var viewModel: String
    var input: String
    var value: JSONValue
    var idempotencyKey: String?
    /// The login the request carried (the key of its cookie), checked by the runner against the session's.
    var login: String? = nil
    /// A delete's reason: the person signed out (`signed-out`) rather than the session being deleted.
    var signedOut = false

    func encode(replyTo: String, correlation: Int) -> [UInt8] {
        var w = ForwardWire.Writer(
            tag: ForwardWire.inputTag,
            capacity: 96 + sessionID.utf8.count + replyTo.utf8.count + (login?.utf8.count ?? 0))
        w.field(
            (isDelete ? "d" : "") + (idempotencyKey == nil ? "" : "k") + (login == nil ? "" : "l")
                + (signedOut ? "o" : ""))
        w.field(sessionID)
        w.field(viewModel)
        w.field(input)
        w.field(idempotencyKey ?? "")
        w.field(login ?? "")
        w.field(replyTo)
        w.field(correlation)
        w.field(value.bytes)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> (ForwardedInput, replyTo: String, correlation: Int)? {
        var r = ForwardWire.Reader(bytes, tag: ForwardWire.inputTag)
        guard let flags = r.field(), let s = r.string(), let m = r.string(), let i = r.string(), let k = r.string(),
            let l = r.string(), let replyTo = r.string(), let c = r.int(), let v = r.field(), r.atEnd,
            let value = try? JSONValue.parse(v)
        else { return nil }
        let input = ForwardedInput(
            isDelete: flags.contains(UInt8(ascii: "d")), sessionID: s, viewModel: m, input: i, value: value,
            idempotencyKey: flags.contains(UInt8(ascii: "k")) ? k : nil,
            login: flags.contains(UInt8(ascii: "l")) ? l : nil, signedOut: flags.contains(UInt8(ascii: "o")))
        return (input, replyTo, c)
    }
}

/// What the runner of a session answered to a forwarded input or delete, in the session layer's terms
/// (the sender maps it to HTTP like any local answer).
enum RunnerAnswer: Equatable, Sendable {
    case input(InputOutcome)
    case deleted
    case failed(SessionFailure)

    /// As the answer to an input (a `deleted` answer cannot come for one: read as `notFound`).
    var inputResult: InputResult {
        switch self {
        case .input(let outcome): .success(outcome)
        case .failed(let failure): .failure(failure)
        case .deleted: .failure(.notFound)
        }
    }

    /// As the answer to a delete (an input's outcome cannot come for one: read as `moved`).
    var deleteResult: Result<Void, SessionFailure> {
        switch self {
        case .deleted: .success(())
        case .failed(let failure): .failure(failure)
        case .input: .failure(.moved)
        }
    }
}

/// An answer on its way back: the correlation number and the runner's answer.
/// `moved` marks the answer of a node that does not run the session (any more): the input was not
/// applied there, and another receiver of the same `SPUBLISH` may be applying it (a node that just took
/// the session over while the one it took it from was still unsubscribing).
/// Wire form: `ForwardWire` (`fr2`), fields flags (`m` moved), correlation, then the answer: a kind
/// (`a` accepted, `d` duplicate: inputSeq; `r` rate-limited: seconds, rate; `v` unknown view model: name,
/// count, names; `u` unknown input: view model, input, count, names; `i` invalid value: view model,
/// input, detail; `x` deleted; `f` failed: the failure's name and number).
enum ForwardedReply {
    static func encode(correlation: Int, _ answer: RunnerAnswer, moved: Bool = false) -> [UInt8] {
        var w = ForwardWire.Writer(tag: ForwardWire.replyTag, capacity: 64)
        w.field(moved ? "m" : "")
        w.field(correlation)
        func list(_ names: [String]) {
            w.field(names.count)
            for n in names { w.field(n) }
        }
        switch answer {
        case .input(.accepted(let n)):
            w.field("a")
            w.field(n)
        case .input(.duplicate(let n)):
            w.field("d")
            w.field(n)
        case .input(.rateLimited(let seconds, let rate)):
            w.field("r")
            w.field(seconds)
            w.field(rate)
        case .input(.unknownViewModel(let name, let known)):
            w.field("v")
            w.field(name)
            list(known)
        case .input(.refused(.unknownInput(let vm, let input, let known))):
            w.field("u")
            w.field(vm)
            w.field(input)
            list(known)
        case .input(.refused(.invalidValue(let vm, let input, let detail))):
            w.field("i")
            w.field(vm)
            w.field(input)
            w.field(detail)
        case .deleted:
            w.field("x")
        case .failed(let f):
            w.field("f")
            let (name, n) = f.wire
            w.field(name)
            w.field(n)
        }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> (correlation: Int, answer: RunnerAnswer, moved: Bool)? {
        var r = ForwardWire.Reader(bytes, tag: ForwardWire.replyTag)
        guard let flags = r.field(), let c = r.int(), let kind = r.string() else { return nil }
        func list() -> [String]? {
            guard let count = r.int(), (0...256).contains(count) else { return nil }
            var names: [String] = []
            for _ in 0..<count {
                guard let n = r.string() else { return nil }
                names.append(n)
            }
            return names
        }
        let answer: RunnerAnswer
        switch kind {
        case "a":
            guard let n = r.int() else { return nil }
            answer = .input(.accepted(inputSeq: n))
        case "d":
            guard let n = r.int() else { return nil }
            answer = .input(.duplicate(inputSeq: n))
        case "r":
            guard let s = r.int(), let rate = r.int() else { return nil }
            answer = .input(.rateLimited(retryAfterSeconds: s, inputsPerSecond: rate))
        case "v":
            guard let name = r.string(), let known = list() else { return nil }
            answer = .input(.unknownViewModel(name: name, known: known))
        case "u":
            guard let vm = r.string(), let input = r.string(), let known = list() else { return nil }
            answer = .input(.refused(.unknownInput(viewModel: vm, input: input, known: known)))
        case "i":
            guard let vm = r.string(), let input = r.string(), let detail = r.string() else { return nil }
            answer = .input(.refused(.invalidValue(viewModel: vm, input: input, detail: detail)))
        case "x": answer = .deleted
        case "f":
            guard let name = r.string(), let n = r.int(), let f = SessionFailure(wire: name, n) else { return nil }
            answer = .failed(f)
        default: return nil
        }
        guard r.atEnd else { return nil }
        return (c, answer, flags.contains(UInt8(ascii: "m")))
    }
}

extension SessionFailure {
    /// The failure's name and number in a forwarded reply.
    fileprivate var wire: (String, Int) {
        switch self {
        case .notFound: ("notFound", 0)
        case .sessionLimit(let n): ("sessionLimit", n)
        case .tooManyStreams(let limit, let clusterWide):
            (clusterWide ? "tooManyStreamsCluster" : "tooManyStreams", limit)
        case .storeUnavailable: ("storeUnavailable", 0)
        case .busy: ("busy", 0)
        case .moved: ("moved", 0)
        case .heldElsewhere(let seconds): ("heldElsewhere", seconds)
        case .runnerDidNotAnswer: ("runnerDidNotAnswer", 0)
        case .unreadableState: ("unreadableState", 0)
        case .tooLarge(let n): ("tooLarge", n)
        case .notReplicated: ("notReplicated", 0)
        case .shortOfReplicas: ("shortOfReplicas", 0)
        case .clientSessionLimit(let n): ("clientSessionLimit", n)
        case .clientCreationRate(let s, _): ("clientCreationRate", s)
        }
    }

    /// The failure a forwarded reply names; nil for a name this build does not know.
    fileprivate init?(wire name: String, _ n: Int) {
        switch name {
        case "notFound": self = .notFound
        case "sessionLimit": self = .sessionLimit(n)
        case "tooManyStreams": self = .tooManyStreams(limit: n, clusterWide: false)
        case "tooManyStreamsCluster": self = .tooManyStreams(limit: n, clusterWide: true)
        case "storeUnavailable": self = .storeUnavailable
        case "busy": self = .busy
        case "moved": self = .moved
        case "heldElsewhere": self = .heldElsewhere(seconds: n)
        case "runnerDidNotAnswer": self = .runnerDidNotAnswer
        case "unreadableState": self = .unreadableState
        case "tooLarge": self = .tooLarge(n)
        case "notReplicated": self = .notReplicated
        case "shortOfReplicas": self = .shortOfReplicas
        case "clientSessionLimit": self = .clientSessionLimit(n)
        case "clientCreationRate": self = .clientCreationRate(retryAfterSeconds: n, perSecond: 0)
        default: return nil
        }
    }
}

/// The wire form of the forwarding messages (`ForwardedInput`, `ForwardedReply`): a tag naming the
/// message and its version (`fi2\n`: an input, with the login key its request carried; `fr2\n`: the
/// reply carries the runner's answer, no longer an HTTP response), then fields, each
/// `<decimal length>:<bytes>`. Written
/// and read in one pass with no intermediate tree: JSON here cost far more per forwarded
/// input across the two nodes (docs/BENCHMARKS.md). A message with another tag (a node of another
/// version) or a malformed one decodes to nil and is dropped (`ClusterNode.dropUnreadable`: a warning
/// in the log); its sender answers `503` after its forwarding time-out.
enum ForwardWire {
    static let inputTag: [UInt8] = Array("fi2\n".utf8)
    static let replyTag: [UInt8] = Array("fr2\n".utf8)
    /// The longest length prefix a reader accepts (a field is at most a Redis message: 512 MB < 10⁹).
    static let maxLengthDigits = 9

    struct Writer {
        private(set) var bytes: [UInt8]

        init(tag: [UInt8], capacity: Int) {
            bytes = []
            bytes.reserveCapacity(capacity)
            bytes.append(contentsOf: tag)
        }

        mutating func field(_ content: some Collection<UInt8>) {
            JSONValue.writeInt(content.count, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            bytes.append(contentsOf: content)
        }

        mutating func field(_ s: String) { field(s.utf8) }

        mutating func field(_ n: Int) {
            var digits = n < 0 ? 2 : 1
            var rest = n.magnitude
            while rest >= 10 {
                rest /= 10
                digits += 1
            }
            JSONValue.writeInt(digits, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONValue.writeInt(n, into: &bytes)
        }
    }

    struct Reader {
        private let bytes: [UInt8]
        private var index: Int
        private var valid: Bool

        init(_ bytes: [UInt8], tag: [UInt8]) {
            self.bytes = bytes
            valid = bytes.starts(with: tag)
            index = tag.count
        }

        /// True when every byte was read and nothing was malformed.
        var atEnd: Bool { valid && index == bytes.count }

        /// The next field's bytes, or nil (malformed, or no field left).
        mutating func field() -> ArraySlice<UInt8>? {
            guard valid else { return nil }
            var length = 0
            var digits = 0
            while index < bytes.count, bytes[index] != UInt8(ascii: ":") {
                let d = bytes[index] &- UInt8(ascii: "0")
                guard d < 10, digits < ForwardWire.maxLengthDigits else { return invalid() }
                length = length * 10 + Int(d)
                digits += 1
                index += 1
            }
            guard digits > 0, index < bytes.count, bytes.count - (index + 1) >= length else { return invalid() }
            let start = index + 1
            index = start + length
            return bytes[start..<index]
        }

        mutating func string() -> String? { field().map { String(decoding: $0, as: UTF8.self) } }

        /// A decimal integer field (an optional `-`, then 1 to 18 digits).
        mutating func int() -> Int? {
            guard var digits = field() else { return nil }
            let negative = digits.first == UInt8(ascii: "-")
            if negative { digits = digits.dropFirst() }
            guard (1...18).contains(digits.count) else { return invalid() }
            var n = 0
            for b in digits {
                let d = b &- UInt8(ascii: "0")
                guard d < 10 else { return invalid() }
                n = n * 10 + Int(d)
            }
            return negative ? -n : n
        }

        private mutating func invalid<T>() -> T? {
            valid = false
            return nil
        }
    }
}

/// A forwarded input waiting for the owner's answer (sender loop only).
struct PendingForward {
    var reply: (RunnerAnswer) -> Void
    var timer: LoopTimer
    var sessionID: String
    /// How many subscribers the `SPUBLISH` reached (nil until its reply is in).
    var receivers: Int?
    /// `moved` answers so far, and the last one: used only once every receiver has answered `moved`.
    var movedAnswers = 0
    var moved: RunnerAnswer?
    /// What to do instead of answering `moved` once every receiver has (the session moved: ask Redis
    /// again who runs it), when the sender may try again.
    var onAllMoved: (() -> Void)?

    /// The answer to give once every receiver of the `SPUBLISH` has answered `moved` (nil until then).
    var allMoved: RunnerAnswer? {
        guard let moved, let receivers, movedAnswers >= receivers else { return nil }
        return moved
    }
}

extension ClusterNode {
    /// Sends `input` to lease holder `holder` (the session's owner as Redis last said) through Redis, on
    /// its input channel on the session's master, and answers with the owner's answer, or `503` (nobody
    /// runs it right now, or no answer in time) (loop `owner`). When the `SPUBLISH` reaches nobody (the
    /// holder is gone: the input went nowhere), or every receiver answers `moved` (the holder no longer
    /// runs the session: nothing was applied), and `onNobody` is given, `onNobody` runs instead of the `503`.
    func forward(
        _ input: ForwardedInput, to holder: String, owner: LoopSessions, remainingMilliseconds ms: Int,
        onNobody: (() -> Void)? = nil, reply: @escaping (RunnerAnswer) -> Void
    ) {
        let index = owner.loop.index
        let state = perLoop[index]
        state.value.nextForward += 1
        let correlation = state.value.nextForward
        let timer = owner.loop.schedule(after: forwardTimeout) {
            guard let pending = state.value.forwards.removeValue(forKey: correlation) else { return }
            pending.reply(.failed(.runnerDidNotAnswer))
        }
        state.value.forwards[correlation] = PendingForward(
            reply: reply, timer: timer, sessionID: input.sessionID, onAllMoved: onNobody)
        let payload = input.encode(replyTo: replyChannel(for: input.sessionID, loop: index), correlation: correlation)
        let channel = RedisArg(inputChannel(holder: holder, session: input.sessionID, loop: index))
        clients[index].send(["SPUBLISH", channel, RedisArg(bytes: payload)], key: channel) { result in
            if case .success(let v) = result, let n = v.int, n > 0 {
                self.metrics.crossNodeInputs.increment()
                // The owner got it: its answer (or the timer) completes the request.
                guard var pending = state.value.forwards[correlation] else { return }
                pending.receivers = Int(n)
                state.value.forwards[correlation] = pending
                if let moved = pending.allMoved { self.completeMoved(correlation, with: moved, loop: index) }
                return
            }
            guard let pending = state.value.forwards.removeValue(forKey: correlation) else { return }
            pending.timer.cancel()
            if case .success = result, let onNobody { return onNobody() }
            if case .failure = result {
                self.metrics.redisErrors.increment()
                return pending.reply(.failed(.storeUnavailable))
            }
            pending.reply(.failed(.heldElsewhere(seconds: max(1, (ms + 999) / 1000))))
        }
    }

    /// The owner's side: a forwarded input arrived on the session's input channel (owner loop `owner`).
    func receiveForwarded(_ payload: [UInt8], owner: LoopSessions) {
        guard let (input, replyTo, correlation) = ForwardedInput.decode(payload) else {
            return dropUnreadable(payload, loop: owner.loop.index)
        }
        let client = clients[owner.loop.index]
        let publish: (RunnerAnswer, Bool) -> Void = { answer, moved in
            let bytes = ForwardedReply.encode(correlation: correlation, answer, moved: moved)
            let channel = RedisArg(replyTo)
            client.send(["SPUBLISH", channel, RedisArg(bytes: bytes)], key: channel) { _ in }
        }
        guard let owned = perLoop[owner.loop.index].value.owned[input.sessionID] else {
            return publish(.failed(.moved), true)
        }
        if input.isDelete {
            // A session of a login answers only that login (an input is checked by `applyInput`).
            guard owned.session.handle.admits(input.login) else { return publish(.failed(.notFound), false) }
            return deleteOwned(owned, reason: input.signedOut ? "signed-out" : "deleted") { result in
                switch result {
                case .success: publish(.deleted, false)
                case .failure(let f): publish(.failed(f), false)
                }
            }
        }
        let sessionInput = SessionInput(
            sessionID: input.sessionID, viewModel: input.viewModel, input: input.input, value: input.value,
            idempotencyKey: input.idempotencyKey, login: input.login)
        applyInput(owned, sessionInput) { result in
            switch result {
            case .success(let outcome): publish(.input(outcome), false)
            case .failure(let f): publish(.failed(f), false)
            }
        }
    }

    /// The sender's side: an owner answered a forwarded input (loop `index`). A `moved` answer completes
    /// the request only once every receiver of the `SPUBLISH` has answered `moved` (another receiver may
    /// be the session's new owner, applying the input); the session's remembered holder is forgotten.
    func receiveForwardReply(_ payload: [UInt8], loop index: Int) {
        let state = perLoop[index]
        guard let (correlation, answer, moved) = ForwardedReply.decode(payload) else {
            return dropUnreadable(payload, loop: index)
        }
        guard var pending = state.value.forwards[correlation] else { return }
        guard moved else { return complete(correlation, with: answer, loop: index) }
        state.value.heldElsewhere[pending.sessionID] = nil
        pending.movedAnswers += 1
        pending.moved = answer
        state.value.forwards[correlation] = pending
        if let moved = pending.allMoved { completeMoved(correlation, with: moved, loop: index) }
    }

    /// A forwarding message this node cannot read (a node of another version during a rolling deploy, or
    /// damage) is dropped: its sender answers `503` after its time-out. Said in the log at most every
    /// 10 s per loop, with the number dropped since, and never with the message's content (it may hold a
    /// user's input).
    func dropUnreadable(_ payload: [UInt8], loop index: Int) {
        let state = perLoop[index]
        state.value.unreadable += 1
        let t = env.now()
        if let last = state.value.unreadableLoggedAt, t - last < 10 { return }
        logger.warning(
            "cluster: unreadable forwarding message dropped (a node of another version?)",
            metadata: [
                "dropped": "\(state.value.unreadable)", "bytes": "\(payload.count)",
                "tag": "\(String(decoding: payload.prefix(3).filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self))",
            ])
        state.value.unreadable = 0
        state.value.unreadableLoggedAt = t
    }

    /// Answers the forwarded input `correlation` of loop `index` with `response` (once).
    func complete(_ correlation: Int, with answer: RunnerAnswer, loop index: Int) {
        guard let pending = perLoop[index].value.forwards.removeValue(forKey: correlation) else { return }
        pending.timer.cancel()
        pending.reply(answer)
    }

    /// Every receiver of the forwarded input `correlation` answered `moved` (none applied it): its sender
    /// asks Redis again who runs the session when it may (`onAllMoved`), else answers `moved` (once).
    private func completeMoved(_ correlation: Int, with moved: RunnerAnswer, loop index: Int) {
        guard let pending = perLoop[index].value.forwards.removeValue(forKey: correlation) else { return }
        pending.timer.cancel()
        if let retry = pending.onAllMoved { return retry() }
        pending.reply(moved)
    }

    /// Forwards `input` without asking Redis who holds the lease when this loop saw another node's live
    /// lease on the session recently (`ClusterLoopState.heldElsewhere`, until that lease's remaining time
    /// then), to that holder: one round trip less per forwarded input. Otherwise, or when the `SPUBLISH`
    /// reaches nobody (the holder died or drained) or the holder answers `moved` (it released the session),
    /// runs `otherwise` (the `acquire`, which may take the session over). Nothing is lost or applied twice
    /// by skipping `acquire`: a holder applies only the inputs of sessions it runs (its commits are fenced),
    /// a `SPUBLISH` that reached nobody delivered the input nowhere, and a holder that no longer runs the
    /// session answers `moved` without applying it (loop `owner`).
    func forwardToKnownHolder(
        _ input: ForwardedInput, owner: LoopSessions, reply: @escaping (RunnerAnswer) -> Void,
        otherwise: @escaping () -> Void
    ) {
        let state = perLoop[owner.loop.index]
        let id = input.sessionID
        guard state.value.owned[id] == nil, let (holder, until) = state.value.heldElsewhere[id] else {
            return otherwise()
        }
        let left = until - env.now()
        guard left > 0 else {
            state.value.heldElsewhere[id] = nil
            return otherwise()
        }
        forward(
            input, to: holder, owner: owner, remainingMilliseconds: Int(left * 1000),
            onNobody: {
                state.value.heldElsewhere[id] = nil
                otherwise()
            }, reply: reply)
    }

    /// Remembers that `holder` (another node's loop) holds session `id`'s lease for `ms` more milliseconds
    /// (loop `owner`).
    func rememberHolder(_ id: String, holder: String, remainingMilliseconds ms: Int, owner: LoopSessions) {
        let state = perLoop[owner.loop.index]
        let t = env.now()
        if state.value.heldElsewhere.count >= 4096 {
            state.value.heldElsewhere = state.value.heldElsewhere.filter { $0.value.until > t }
        }
        state.value.heldElsewhere[id] = (holder, t + Double(ms) / 1000)
    }

    /// Every `streamedCheckInterval`, each loop checks the sessions it streams (a slice of them every
    /// `streamedCheckInterval / streamedCheckSlices`, each session in its own slice): their streams here
    /// count towards the session's cluster-wide limit while the loop's stream-liveness key lives (renewed
    /// here once per pass and master, `RedisSessionStore.keepStreamsLive`), and a session whose lease
    /// nobody holds (its owner died, `kill -9`, or released it) is acquired and taken over even if no
    /// request comes (a search it was loading completes, the streams see it).
    ///
    /// Each session is checked in Redis one by one (`checkStreamed`: its streams' deadlines, its keys' idle
    /// expiry, its lease's holder, its `seq`) on every `expiryRenewalPasses`-th pass of its slice (each
    /// slice's renewing passes offset by the slice, so every pass renews an equal share; about once per
    /// `SessionStoreLimits.expiryRenewalSeconds`, as an owner's commits renew it: their expiry is the idle
    /// time-out plus that interval, so a watched session never expires), on every pass with replica acks
    /// (a stream behind its session's `seq` catches up, `catchUpIfBehind`), and while its holder is not
    /// known. On the other passes a session whose last check named a holder costs nothing of its own: the
    /// slice asks once per distinct holder and master whether its liveness key lives (one `MGET`), and checks
    /// one by one only the sessions of holders that are gone; one run by this node is looked up in memory
    /// (its last activity moves on: watched here, not idle). A holder replaced by another live one needs
    /// nothing: the stream is fed by the session's channel whoever commits. Without replica acks a stream
    /// misses no event while subscribed (the event is published in the commit's script), and every new
    /// subscription catches up from the history (`StreamedSession.follow`). Checked one by one, every
    /// streamed session was a check in Redis every interval.
    func startOrphanChecks() {
        for (index, state) in perLoop.enumerated() {
            let loop = state.loop
            loop.execute {
                let slices = self.streamedCheckSlices
                state.value.orphanTimer = loop.scheduleRepeating(every: self.streamedCheckInterval / Double(slices)) {
                    let slice = state.value.orphanSlice
                    state.value.orphanSlice = (slice + 1) % slices
                    if slice == 0 {
                        state.value.orphanPass &+= 1
                        if !state.value.fed.isEmpty { self.stores[index].keepStreamsLive() }
                    }
                    // Each slice on a pass of its own: a pass renews a 1/`expiryRenewalPasses` share of the
                    // sessions, not all of them every `expiryRenewalPasses`-th pass (every loop of every node
                    // started together would renew all its sessions in the same interval).
                    let renews = (state.value.orphanPass &+ slice) % self.expiryRenewalPasses == 0
                    let oneByOne = renews || self.settings.replicaAcks > 0
                    var byHolder: [String: [String]] = [:]
                    var runHere: [Int: [String]] = [:]
                    for fed in state.value.fedSessions(inSlice: slice) {
                        guard let id = fed.streams.first?.sessionID else { continue }
                        guard oneByOne || fed.holder == 0 else {
                            let holder = state.value.knownHolders[Int(fed.holder)]
                            if let j = self.holderLoops[holder] {
                                runHere[j, default: []].append(id)
                            } else {
                                byHolder[holder, default: []].append(id)
                            }
                            continue
                        }
                        self.checkStreamed(id, fed, renewsExpiry: renews, from: index)
                    }
                    if !byHolder.isEmpty {
                        self.stores[index].findSessionsOfGoneHolders(byHolder) { self.recheck($0, from: index) }
                    }
                    for (j, ids) in runHere { self.checkRunHere(ids, on: j, from: index) }
                }
            }
        }
    }

    /// Sessions streamed on loop `index` whose last check named loop `j` of this node as their holder: one
    /// still run there is watched, not idle; one that left it is checked one by one (it may be free).
    private func checkRunHere(_ ids: [String], on j: Int, from index: Int) {
        let runner = perLoop[j]
        runner.loop.runOrExecute {
            let t = self.env.now()
            var left: [String] = []
            for id in ids {
                if let owned = runner.value.owned[id] { owned.session.lastActivity = t } else { left.append(id) }
            }
            guard !left.isEmpty else { return }
            let unrun = left
            self.perLoop[index].loop.runOrExecute { for id in unrun { self.recheck(id, from: index) } }
        }
    }

    /// Checks session `id`, streamed on loop `index`, one by one now (if it is still streamed there).
    private func recheck(_ id: String, from index: Int) {
        guard let fed = perLoop[index].value.fed[id], !fed.streams.isEmpty else { return }
        checkStreamed(id, fed, renewsExpiry: false, from: index)
    }

    /// Checks session `id` in Redis now, with `fed`'s streams (loop `index`, which hosts them).
    private func checkStreamed(_ id: String, _ fed: StreamedSession, renewsExpiry: Bool, from index: Int) {
        guard let owner = owner(of: id) else { return }
        stores[index].checkStreams(
            sessionID: id, members: fed.streams.map { $0.member }, ttlMilliseconds: streamDeadlineMilliseconds,
            renewsExpiry: renewsExpiry
        ) { result in
            if case .success(let check) = result {
                self.catchUpIfBehind(id, seq: check.seq, loop: index)
                let state = self.perLoop[index]
                if let fed = state.value.fed[id] { fed.holder = state.value.holderNumber(check.holder) }
            }
            let holder = result.map(\.holder)
            owner.loop.runOrExecute {
                if let owned = self.perLoop[owner.loop.index].value.owned[id] {
                    owned.session.lastActivity = self.env.now()  // watched here: not idle
                    return
                }
                // A live lease elsewhere: nothing to do. Free, or this loop's own (the session left this
                // node after a failed commit): acquire it.
                guard case .success(let holder) = holder, holder == nil || holder == self.holders[owner.loop.index]
                else { return }
                self.withOwned(id, owner: owner, refuse: { _ in }, onHeld: { _, _ in }) { _ in }
            }
        }
    }

    /// A stream of session `id` here (fed from Redis) whose last written id stayed below the session's
    /// `seq` over two checks in a row has missed a live event (with replica acks the runner publishes after
    /// the replicas confirmed a commit: a runner that died or lost Redis in between publishes nothing) and
    /// catches up from the history (loop `index`, which hosts the streams). One check behind is normal (a
    /// commit is stored before its event arrives), so nothing is read then.
    private func catchUpIfBehind(_ id: String, seq: UInt64, loop index: Int) {
        guard let fed = perLoop[index].value.fed[id], !fed.local, fed.subscribed else { return }
        for s in fed.streams { s.checked(seq: seq) }
    }
}
