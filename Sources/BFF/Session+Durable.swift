import JSON
import ViewModels

extension Session {
    /// The version of the session envelope (`storedForm` writes it, `restore` reads it).
    static let durableVersion = 1

    /// Restores the view models from a stored session state (`storedForm`'s bytes:
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

    /// The bytes stored as a session's state (`SessionSnapshot.state`, `SessionCommit.state`): each of the
    /// session's own view models' `durableState` (the shared `status` is app-wide and not included; `seq`
    /// and `inputSeq` are stored beside the state) plus `outputs`, the view models' snapshot outputs, so
    /// any node answers `GET /state` without running them:
    /// `{"version":1,"viewModels":{name: durableState, …},"outputs":{name: snapshot, …}}`, and
    /// `"person": {…}` for a session of a login (`SessionOwner`). Each view model's parts come from its memo in `memos`
    /// (made on first use, one per view model, kept by the owner between commits), so a commit encodes
    /// only the view models that changed since the last one (owner loop).
    func storedForm(memos: inout [StoredFormMemo]) -> [UInt8] {
        let vms = viewModels
        if memos.count != vms.count { memos = vms.map { _ in StoredFormMemo() } }
        var size = 48
        for (vm, memo) in zip(vms, memos) {
            memo.refresh(vm)
            size += 2 * vm.name.utf8.count + memo.durable.count + memo.snapshot.count + 8
        }
        var out: [UInt8] = []
        out.reserveCapacity(size)
        out.append(contentsOf: #"{"version":"#.utf8)
        JSONValue.writeInt(Session.durableVersion, into: &out)
        /// `{name: part, …}` of every view model, `part` already JSON text.
        func members(_ part: (StoredFormMemo) -> [UInt8]) {
            out.append(UInt8(ascii: "{"))
            for (i, (vm, memo)) in zip(vms, memos).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(vm.name, into: &out)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: part(memo))
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #","viewModels":"#.utf8)
        members { $0.durable }
        out.append(contentsOf: #","outputs":"#.utf8)
        members { $0.snapshot }
        if let owner = handle.owner {
            out.append(contentsOf: #","person":"#.utf8)
            out.append(contentsOf: owner.storedJSON)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The person a stored form belongs to (its `person`), nil for an anonymous session's or bytes that are
    /// not a stored form.
    static func person(inStoredForm bytes: [UInt8]) -> SignedInPerson? {
        guard !bytes.isEmpty, let parsed = try? JSONValue.parse(bytes) else { return nil }
        return SessionOwner.person(in: parsed["person"])
    }

    /// `storedForm(memos:)` without memos kept (a session's first commit).
    func storedForm() -> [UInt8] {
        var memos: [StoredFormMemo] = []
        return storedForm(memos: &memos)
    }
}
