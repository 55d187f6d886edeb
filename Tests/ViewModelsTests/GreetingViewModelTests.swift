import Features
import JSON
import ViewModels
import XCTest

/// Every output after every input of the `greeting` view model.
final class GreetingViewModelTests: XCTestCase {
    private func snapshot(buttonEnabled: Bool, label: JSONValue) -> JSONObject {
        ["buttonEnabled": .bool(buttonEnabled), "label": label]
    }

    func testContractNames() {
        let vm = GreetingViewModel()
        XCTAssertEqual(vm.name, "greeting")
        XCTAssertEqual(vm.inputNames, ["name", "greet"])
        XCTAssertEqual(vm.snapshot.keys, ["buttonEnabled", "label"])
    }

    func testNameEnablesButtonAndGreetShowsUppercasedName() throws {
        let vm = GreetingViewModel()
        let events = EventRecorder(vm)
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: false, label: nil))

        try vm.send(input: "name", value: "swift", inputSeq: 1)
        XCTAssertEqual(events.take(), [ViewModelEvent(inputSeq: 1, outputs: ["buttonEnabled": true])])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: true, label: nil))

        try vm.send(input: "greet", value: nil, inputSeq: 2)
        XCTAssertEqual(events.take(), [ViewModelEvent(inputSeq: 2, outputs: ["label": "Hello, SWIFT!"])])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: true, label: "Hello, SWIFT!"))

        // Editing the name does not change the label until greeted again.
        try vm.send(input: "name", value: "Straße", inputSeq: 3)
        XCTAssertEqual(events.take(), [])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: true, label: "Hello, SWIFT!"))

        try vm.send(input: "greet", value: [:], inputSeq: 4)
        XCTAssertEqual(events.take(), [ViewModelEvent(inputSeq: 4, outputs: ["label": "Hello, STRASSE!"])])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: true, label: "Hello, STRASSE!"))

        // Greeting the same name again changes nothing, so nothing is emitted.
        try vm.send(input: "greet", value: nil, inputSeq: 5)
        XCTAssertEqual(events.take(), [])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: true, label: "Hello, STRASSE!"))
    }

    func testGreetWhileButtonDisabledIsNoOp() throws {
        let vm = GreetingViewModel()
        let events = EventRecorder(vm)
        try vm.send(input: "greet", value: nil, inputSeq: 1)
        XCTAssertEqual(events.take(), [])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: false, label: nil))

        try vm.send(input: "name", value: "a", inputSeq: 2)
        try vm.send(input: "greet", value: nil, inputSeq: 3)
        try vm.send(input: "name", value: "", inputSeq: 4)
        XCTAssertEqual(
            events.take(),
            [
                ViewModelEvent(inputSeq: 2, outputs: ["buttonEnabled": true]),
                ViewModelEvent(inputSeq: 3, outputs: ["label": "Hello, A!"]),
                ViewModelEvent(inputSeq: 4, outputs: ["buttonEnabled": false]),
            ])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: false, label: "Hello, A!"))

        try vm.send(input: "greet", value: nil, inputSeq: 5)
        XCTAssertEqual(events.take(), [])
        XCTAssertEqual(vm.snapshot, snapshot(buttonEnabled: false, label: "Hello, A!"))
    }

    func testInvalidInputsThrowAndChangeNothing() throws {
        let vm = GreetingViewModel()
        try vm.send(input: "name", value: "x", inputSeq: 1)
        let events = EventRecorder(vm)
        let before = vm.snapshot

        XCTAssertThrowsError(try vm.send(input: "name", value: 5, inputSeq: 2)) {
            XCTAssertEqual(
                $0 as? InputError,
                .invalidValue(viewModel: "greeting", input: "name", detail: "expected a string, got a number"))
        }
        XCTAssertThrowsError(try vm.send(input: "name", value: nil, inputSeq: 2)) {
            XCTAssertEqual(
                $0 as? InputError,
                .invalidValue(viewModel: "greeting", input: "name", detail: "expected a string, got null"))
        }
        XCTAssertThrowsError(try vm.send(input: "greet", value: "now", inputSeq: 2)) {
            XCTAssertEqual(
                $0 as? InputError,
                .invalidValue(
                    viewModel: "greeting", input: "greet",
                    detail: "takes no value (send an empty body or {}), got a string"))
        }
        XCTAssertThrowsError(try vm.send(input: "greet", value: ["a": 1], inputSeq: 2)) {
            XCTAssertEqual(
                $0 as? InputError,
                .invalidValue(
                    viewModel: "greeting", input: "greet",
                    detail: "takes no value (send an empty body or {}), got an object"))
        }
        XCTAssertThrowsError(try vm.send(input: "shout", value: nil, inputSeq: 2)) {
            XCTAssertEqual(
                $0 as? InputError, .unknownInput(viewModel: "greeting", input: "shout", known: ["name", "greet"]))
            XCTAssertEqual(
                ($0 as? InputError)?.detail, "view model 'greeting' has no input 'shout'; known inputs: name, greet")
        }
        XCTAssertEqual(events.take(), [])
        XCTAssertEqual(vm.snapshot, before)
    }

    func testInputAppliedFromInsideOnEventIsReportedAfterTheCurrentEvent() throws {
        let vm = GreetingViewModel()
        var seen: [ViewModelEvent] = []
        vm.onEvent = { _, event in
            seen.append(event)
            if event.inputSeq == 1 { try? vm.send(input: "greet", value: nil, inputSeq: 2) }
        }
        try vm.send(input: "name", value: "re", inputSeq: 1)
        XCTAssertEqual(
            seen,
            [
                ViewModelEvent(inputSeq: 1, outputs: ["buttonEnabled": true]),
                ViewModelEvent(inputSeq: 2, outputs: ["label": "Hello, RE!"]),
            ])
        vm.onEvent = nil
    }

    /// Measures one input → event round trip (validation, transition, diff, encoding, callback).
    func testCostOfOneInputToEvent() throws {
        let vm = GreetingViewModel()
        var count = 0
        vm.onEvent = { _, _ in count += 1 }
        let names: [JSONValue] = ["", "swift"]
        let n = 10_000  // a smoke figure in debug builds; the release figure is in docs/ARCHITECTURE.md
        let start = ContinuousClock.now
        for i in 0..<n { try vm.send(input: "name", value: names[i & 1], inputSeq: i) }
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(count, n - 1)  // the first input ("") changes nothing
        let ns = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
        print("greeting input→event: \(Int(ns / Double(n))) ns/op over \(n) inputs")
    }
}
