import JSON
import ViewModels

extension Session {
    /// The version of the session envelope (`durableState`).
    static let durableVersion = 1

    /// The session's own view models in stored form, the bytes cluster mode keeps as a session's state
    /// (`SessionSnapshot.state`, `SessionCommit.state`): `{"version": 1, "viewModels": {name: envelope}}`,
    /// each envelope a view model's `durableState`. The shared `status` is app-wide, so it is not included;
    /// `seq` and `inputSeq` are stored beside the state, not in it. Owner loop only.
    var durableState: [UInt8] {
        var states = JSONObject()
        for vm in viewModels { states[vm.name] = vm.durableState }
        return JSONValue.object(["version": .int(Session.durableVersion), "viewModels": .object(states)]).bytes
    }

    /// Restores the view models from `durableState`'s bytes (owner loop only): each resumes its work under
    /// way (a loading search issues its request again). A view model the bytes do not name keeps its state
    /// (it was added after they were written); names no view model has are ignored. All or nothing: when
    /// one view model refuses its part, those already restored are put back as they were, and the error
    /// says which part was wrong. Emits no event (streams opened afterwards get the snapshot).
    func restore(from bytes: [UInt8]) throws(DurableStateError) {
        let parsed: JSONValue
        do {
            parsed = try JSONValue.parse(bytes)
        } catch {
            throw .malformed(viewModel: "session", detail: "not JSON: \(error)")
        }
        guard case .object(let envelope) = parsed else {
            throw .malformed(viewModel: "session", detail: "expected an object, got \(parsed.typeDescription)")
        }
        guard let version = envelope["version"]?.intValue else {
            throw .malformed(viewModel: "session", detail: "'version' is missing or not an integer")
        }
        guard version == Session.durableVersion else {
            throw .unsupportedVersion(viewModel: "session", found: version, supported: Session.durableVersion)
        }
        guard let states = envelope["viewModels"]?.objectValue else {
            throw .malformed(viewModel: "session", detail: "'viewModels' is missing or not an object")
        }
        // Whatever happens below, the published encoded snapshot may no longer match: withdraw it, so the
        // next `GET /state` on any loop asks the owner (a restore emits no event that would do it).
        defer { snapshotChanged() }
        var restored: [(ViewModel, JSONValue)] = []
        for vm in viewModels {
            guard let stored = states[vm.name] else { continue }
            let before = vm.durableState
            do {
                try vm.restore(from: stored)
            } catch {
                for (done, state) in restored.reversed() { try? done.restore(from: state) }
                throw error
            }
            restored.append((vm, before))
        }
    }
}
