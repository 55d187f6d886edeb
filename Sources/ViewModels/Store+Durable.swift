import JSON

extension Store {
    /// The stored form of this view model (owner only):
    /// `{"version": n, "state": {…}, "effects": {"search": inputSeq | null, …}}`.
    ///
    /// `state` is the feature's `Codable` state; `effects` names the cancellable effects under way and the
    /// `inputSeq` each reports under, so that the ones the feature resumes after a restore keep it.
    /// Handles (tasks, timers) are never stored. Read it before `close()`, which forgets the effects under
    /// way (a loading search stored after it still resumes, but its answer then carries no `inputSeq`).
    public var durableState: JSONValue {
        var effects = JSONObject()
        for (id, inputSeq) in effectInputSeqs.sorted(by: { $0.key.name < $1.key.name }) {
            effects[id.name] = .optional(inputSeq)
        }
        return [
            "version": .int(feature.stateVersion), "state": DurableCoding.encode(state), "effects": .object(effects),
        ]
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
