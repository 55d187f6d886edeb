import JSON
import ViewModels

extension Session {
    /// The version of the session envelope (`Application.clusterState(of:)` writes it, `restore` reads it).
    static let durableVersion = 1

    /// Restores the view models from a stored session state (`Application.clusterState(of:)`'s bytes:
    /// `{"version": 1, "viewModels": {name: envelope}, …}`; owner loop only): each resumes its work under
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
