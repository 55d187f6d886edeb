import JSON

extension Store {
    /// The stored form of this view model (owner only):
    /// `{"version": n, "state": {…}, "effects": {"search": inputSeq | null, …}}`.
    ///
    /// `state` is the feature's `Codable` state; `effects` names the cancellable effects under way and the
    /// `inputSeq` each reports under, so that the ones the feature resumes after a restore keep it.
    /// Handles (tasks, timers) are never stored. Read it before `close()`, which forgets the effects under
    /// way (a loading search stored after it still resumes, but its answer then carries no `inputSeq`).
    /// Parsed from `durableStateBytes`, the one place the stored form is written.
    public var durableState: JSONValue {
        do {
            return try JSONValue.parse(durableStateBytes)
        } catch {
            preconditionFailure("the stored form of '\(name)' is not JSON our parser reads: \(error)")
        }
    }

    /// `durableState` as JSON text (what cluster mode stores): the envelope's members in this order, the
    /// state as `feature.durableJSON` or else `JSONEncoder` wrote it. Owner only.
    public var durableStateBytes: [UInt8] {
        let state = feature.durableJSON(self.state) ?? DurableCoding.encodeBytes(self.state)
        var out: [UInt8] = []
        out.reserveCapacity(state.count + 48)
        out.append(contentsOf: #"{"version":"#.utf8)
        JSONValue.writeInt(feature.stateVersion, into: &out)
        out.append(contentsOf: #","state":"#.utf8)
        out.append(contentsOf: state)
        out.append(contentsOf: #","effects":"#.utf8)
        var effects = JSONObject()
        for (id, inputSeq) in effectInputSeqs.sorted(by: { $0.key.name < $1.key.name }) {
            effects[id.name] = .optional(inputSeq)
        }
        effects.write(into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Restores the state from `durableState`'s form (owner only) and resumes the work the feature says was
    /// under way (a loading search issues its request again). Checks everything first: on any error the
    /// view model is unchanged. Emits no event; the caller shows the restored snapshot.
    public func restore(from durable: JSONValue) throws(DurableStateError) {
        guard case .object(let envelope) = durable else {
            throw .malformed(viewModel: name, detail: "expected an object, got \(durable.typeDescription)")
        }
        guard let version = envelope["version"]?.intValue else {
            throw .malformed(viewModel: name, detail: "'version' is missing or not an integer")
        }
        guard version == feature.stateVersion else {
            throw .unsupportedVersion(viewModel: name, found: version, supported: feature.stateVersion)
        }
        guard let stored = envelope["state"] else { throw .malformed(viewModel: name, detail: "'state' is missing") }
        var inputSeqs: [EffectID: Int] = [:]
        switch envelope["effects"] {
        case nil, .null?: break
        case .object(let effects)?:
            for (name, value) in effects.entries {
                switch value {
                case .null: break
                case .int(let seq): inputSeqs[EffectID(name)] = seq
                default:
                    throw .malformed(
                        viewModel: self.name,
                        detail: "effects.\(name): expected an integer inputSeq or null, got \(value.typeDescription)")
                }
            }
        case let other?:
            throw .malformed(viewModel: name, detail: "'effects' must be an object, got \(other.typeDescription)")
        }
        let decoded = try DurableCoding.decode(Feature.State.self, from: stored, viewModel: name)
        replaceState(with: decoded, inputSeqs: inputSeqs)
    }
}

/// A view model's stored form as JSON text — `durableState` and `snapshot` — kept while the view model's
/// state and the effects under way are unchanged (cluster mode stores both on every commit of a session,
/// though an input usually changes one view model of several). Owner only, like its view model.
public final class StoredFormMemo {
    /// `durableState`'s compact JSON text (as of the last `refresh`).
    public private(set) var durable: [UInt8] = []
    /// `snapshot`'s compact JSON text, an object (as of the last `refresh`).
    public private(set) var snapshot: [UInt8] = []
    /// How many times `refresh` encoded (tests).
    public private(set) var encodings = 0
    /// The store the bytes above describe, and its change count then (`Store.changes`); nil: none yet.
    /// An identifier, not a reference: a weak one gave every store of a cluster-mode session a side table,
    /// and the memo lives only as long as the session whose view models it describes.
    private var madeFrom: (store: ObjectIdentifier, changes: UInt32)?

    public init() {}

    /// Makes `durable` and `snapshot` describe `vm` now: encodes only when its state or its effects under
    /// way changed since the last call (a `Store` counts its changes: one comparison, no cast, no copy).
    /// `snapshot` is exactly `JSONValue.object(vm.snapshot).bytes`; `durable` is `durableStateBytes` (it
    /// parses to `vm.durableState`).
    public func refresh(_ vm: some ViewModel) { vm.refreshStoredForm(self) }

    /// True when the bytes describe `store` as it is after `changes` changes.
    func describes(_ store: ObjectIdentifier, changes: UInt32) -> Bool {
        guard let madeFrom else { return false }
        return madeFrom.store == store && madeFrom.changes == changes
    }

    /// New bytes, made from `madeFrom` (a store and its change count).
    func update(durable: [UInt8], snapshot: [UInt8], madeFrom: (store: ObjectIdentifier, changes: UInt32)) {
        encodings += 1
        self.durable = durable
        self.snapshot = snapshot
        self.madeFrom = madeFrom
    }
}

extension Store {
    /// Encodes into `memo` unless it describes this store as it is (`changes`).
    public func refreshStoredForm(_ memo: StoredFormMemo) {
        let me = ObjectIdentifier(self)
        if memo.describes(me, changes: changes) { return }
        memo.update(durable: durableStateBytes, snapshot: snapshotBytes, madeFrom: (me, changes))
    }

    /// `JSONValue.object(snapshot).bytes`, written straight into one buffer (output names are distinct).
    var snapshotBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.append(UInt8(ascii: "{"))
        var first = true
        for output in outputs {  // not `enumerated()`: in unspecialized code each of its steps is costly
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONValue.writeString(output.name, into: &out)
            out.append(UInt8(ascii: ":"))
            output.encode(state).write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
