// output-store.js — the local copy of the session's view-model outputs, and who listens to them.
//
// One job: apply a `snapshot` (replace) or a view-model event (merge changed outputs, dispatch
// signals) and tell listeners about values that changed. Knows nothing of HTTP or EventSource.
// Main thread only.
import { addListener, emit } from "./bff-support.js";

export class OutputStore {
    /** @param {(viewModel: string) => void} onViewModel called the first time a view model is named */
    constructor(onViewModel = () => {}) {
        /** The `seq` of the last applied event (snapshot or view-model event); -1 before the first. */
        this.seq = -1;
        /** Every view model named by a snapshot or a listener. */
        this.viewModelNames = new Set();
        this._onViewModel = onViewModel;
        this._outputs = new Map(); // viewModel -> Map(output -> value)
        this._haveSnapshot = false;
        this._outputListeners = new Map(); // "vm\u0000output" -> Set(callback)
        this._signalListeners = new Map(); // "vm\u0000signal" -> Set(callback)
    }

    /** `callback(value, previous)` on each change of an output, and at once if its value is known. */
    on(viewModel, output, callback) {
        this.noteViewModel(viewModel);
        const unsubscribe = addListener(this._outputListeners, key(viewModel, output), callback);
        const outputs = this._outputs.get(viewModel);
        if (this._haveSnapshot && outputs && outputs.has(output)) callback(outputs.get(output), undefined);
        return unsubscribe;
    }

    /** `callback(value)` for each signal. */
    onSignal(viewModel, signal, callback) {
        this.noteViewModel(viewModel);
        return addListener(this._signalListeners, key(viewModel, signal), callback);
    }

    /** The last known value of an output, or `undefined`. */
    get(viewModel, output) {
        return this._outputs.get(viewModel)?.get(output);
    }

    noteViewModel(viewModel) {
        if (this.viewModelNames.has(viewModel)) return;
        this.viewModelNames.add(viewModel);
        this._onViewModel(viewModel);
    }

    /** A new session: its events are numbered from scratch (the outputs stay until its snapshot). */
    resetSeq() {
        this.seq = -1;
    }

    /**
     * A `snapshot` replaces the copy; listeners hear only about outputs whose value differs from what
     * they last saw (deep comparison), so a reconnect re-renders nothing unchanged.
     */
    applySnapshot(snapshot, lastEventId) {
        if (!snapshot || typeof snapshot.viewModels !== "object") return;
        const seq = Number(lastEventId || snapshot.seq);
        // One older than what is applied would take the outputs back (two streams overlapped); one at
        // the same seq is applied (it may follow a signal whose state changes were coalesced away).
        if (Number.isFinite(seq) && seq < this.seq) return;
        this.seq = seq;
        const first = !this._haveSnapshot;
        this._haveSnapshot = true;
        const names = new Set([...this._outputs.keys(), ...Object.keys(snapshot.viewModels)]);
        for (const viewModel of names) {
            this.noteViewModel(viewModel);
            const incoming = snapshot.viewModels[viewModel] ?? {};
            const outputs = this._outputsOf(viewModel);
            const changed = [];
            for (const [output, value] of Object.entries(incoming)) {
                if (first || !outputs.has(output) || !sameValue(outputs.get(output), value)) {
                    changed.push([output, value, outputs.get(output)]);
                }
                outputs.set(output, value);
            }
            for (const [output, value, previous] of changed) this._notify(viewModel, output, value, previous);
        }
    }

    /**
     * A view-model event: merges its outputs and dispatches its signals, unless already applied. The
     * shared `status` comes without an id of its own in cluster mode (it is one value for the cluster, not
     * an event of the session: docs/API.md): the browser then reports the previous event's id, so a
     * `status` event is applied unless its id is below what is applied, and moves `seq` only forward.
     */
    applyEvent(viewModel, data, lastEventId) {
        const id = Number(lastEventId);
        const applied = viewModel === "status" ? id < this.seq : id <= this.seq;
        if (Number.isFinite(id) && applied) return; // already applied (replayed after reconnect)
        if (Number.isFinite(id) && id > this.seq) this.seq = id;
        if (!data) return;
        const outputs = this._outputsOf(viewModel);
        for (const [output, value] of Object.entries(data.outputs ?? {})) {
            const previous = outputs.get(output);
            outputs.set(output, value);
            this._notify(viewModel, output, value, previous);
        }
        for (const [signal, value] of Object.entries(data.signals ?? {})) {
            emit(this._signalListeners.get(key(viewModel, signal)), value);
        }
    }

    _outputsOf(viewModel) {
        let outputs = this._outputs.get(viewModel);
        if (!outputs) {
            outputs = new Map();
            this._outputs.set(viewModel, outputs);
        }
        return outputs;
    }

    _notify(viewModel, output, value, previous) {
        emit(this._outputListeners.get(key(viewModel, output)), value, previous);
    }
}

function key(a, b) {
    return `${a}\u0000${b}`;
}

function sameValue(a, b) {
    return a === b || JSON.stringify(a) === JSON.stringify(b);
}
