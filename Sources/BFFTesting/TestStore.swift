/// BFFTesting: tests of view models and of the applications that host them, without sockets —
/// `TestStore` (one view model, every output after every input) and `TestApplication` (the whole HTTP
/// application in process: sessions, inputs, state, problem JSON).
import Dispatch
import Foundation
import JSON
import ViewModels
import XCTest

/// One view model under test, TCA `TestStore`-style: every `send` states every output the input changes
/// (and every signal it emits), and fails when one changed that the test did not state, or one stated
/// did not change. Effects run as they would in a session; their results wait until the test takes
/// them with `receive`, which states what each changes in the same way. A test that ends with results
/// not taken, or events not stated, fails (`finish`, called at `deinit` too).
///
/// Threading: the test's own thread, which is the store's owner (effect results are applied in
/// `receive`, which blocks that thread until one comes: call it from a synchronous test method).
public final class TestStore<Feature: ViewModelFeature> {
    /// The store under test (its `state` and `snapshot` may be read any time).
    public let store: Store<Feature>
    private var events: [ViewModelEvent] = []
    private var inputSeq = 0
    private let results = EffectResults()
    private var finished = false
    /// Where failures go (`XCTFail`; this module's own tests collect them instead).
    var fail: (String, StaticString, UInt) -> Void = { XCTFail($0, file: $1, line: $2) }

    /// A store running `feature` from `initialState`.
    public init(feature: Feature, initialState: Feature.State) {
        let results = self.results
        store = Store(feature: feature, initialState: initialState, executor: { results.push($0) })
        store.onEvent = { [unowned self] _, event in self.events.append(event) }
    }

    deinit { if !finished { finish() } }

    /// The state outputs now.
    public var snapshot: JSONObject { store.snapshot }

    /// Sends input `input` with `value` (as a session would, numbered from 1) and states the outputs it
    /// changes (`outputs`, whole new values) and the signals it emits: nothing else may change.
    public func send(
        _ input: String, _ value: JSONValue = .null, outputs: JSONObject = [:], signals: JSONObject = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        assertNoEvents("before sending \(input)", file: file, line: line)
        do {
            try store.send(input: input, value: value, inputSeq: inputSeq + 1)
        } catch {
            return fail("\(input) was refused: \(error.detail)", file, line)
        }
        inputSeq += 1
        expect(ViewModelEvent(inputSeq: inputSeq, outputs: outputs, signals: signals), file: file, line: line)
    }

    /// Sends an input that must be refused with `error`; nothing changes.
    public func sendRefused(
        _ input: String, _ value: JSONValue = .null, error expected: InputError,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let before = store.snapshot
        do {
            try store.send(input: input, value: value, inputSeq: inputSeq + 1)
            fail("\(input) was accepted; expected \(expected)", file, line)
        } catch {
            if error != expected { fail("\(input) was refused with \(error), expected \(expected)", file, line) }
        }
        if store.snapshot != before { fail("a refused \(input) changed the outputs", file, line) }
        assertNoEvents("after a refused \(input)", file: file, line: line)
    }

    /// Applies an app-wide notice (`ViewModel.receive`) and states what it changes (events without an
    /// input: `inputSeq` nil).
    public func notice(
        _ notice: any Sendable, outputs: JSONObject = [:], signals: JSONObject = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        assertNoEvents("before the notice", file: file, line: line)
        store.receive(notice)
        expect(ViewModelEvent(inputSeq: nil, outputs: outputs, signals: signals), file: file, line: line)
    }

    /// Waits for the next effect result, applies it on the owner (this test) and states what it changes,
    /// under the `inputSeq` of the input that started it. Fails after `timeout` seconds without one.
    public func receive(
        inputSeq: Int?, outputs: JSONObject = [:], signals: JSONObject = [:], timeout: Double = 5,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        assertNoEvents("before receiving", file: file, line: line)
        guard let work = results.next(timeout: timeout) else {
            return fail("no effect result came within \(timeout) s", file, line)
        }
        work()
        expect(ViewModelEvent(inputSeq: inputSeq, outputs: outputs, signals: signals), file: file, line: line)
    }

    /// Ends the test: every event was stated, and no effect is still running or waiting to be received.
    public func finish(file: StaticString = #filePath, line: UInt = #line) {
        finished = true
        assertNoEvents("at the end", file: file, line: line)
        if store.runningEffects != 0 {
            fail("\(store.runningEffects) effects still running or not received at the end", file, line)
        }
        store.close()
    }

    /// The events since the last statement are exactly `expected` (none when it states no change).
    private func expect(_ expected: ViewModelEvent, file: StaticString, line: UInt) {
        let want = expected.outputs.isEmpty && expected.signals.isEmpty ? [] : [expected]
        if events != want { fail("expected \(want), got \(events)", file, line) }
        events = []
    }

    private func assertNoEvents(_ when: String, file: StaticString, line: UInt) {
        guard !events.isEmpty else { return }
        fail("events not stated \(when): \(events)", file, line)
        events = []
    }
}

/// Effect results on their way back to the owner (the test): queued by the store's executor on any
/// thread, taken in order by `next`.
final class EffectResults: @unchecked Sendable {
    // Unchecked: `queue` is used under `lock` only; `ready` counts its items.
    private let lock = NSLock()
    private var queue: [@Sendable () -> Void] = []
    private let ready = DispatchSemaphore(value: 0)

    func push(_ work: @escaping @Sendable () -> Void) {
        lock.lock()
        queue.append(work)
        lock.unlock()
        ready.signal()
    }

    /// The oldest result, waiting up to `timeout` seconds for one; nil if none came.
    func next(timeout: Double) -> (@Sendable () -> Void)? {
        guard ready.wait(timeout: .now() + timeout) == .success else { return nil }
        lock.lock()
        defer { lock.unlock() }
        return queue.removeFirst()
    }
}
