import XCTest

@testable import BFFTesting

/// `TestStore` fails a test exactly when a view model does something the test did not state: an output
/// changed and not stated, one stated and not changed, a refusal that was not one, an effect result
/// not received. Failures are collected here instead of failing this test.
final class TestStoreTests: XCTestCase {
    /// A counter with an effect: `add` counts up at once, `later` counts up when its effect comes back.
    struct Counter: ViewModelFeature {
        typealias State = Int
        enum Action: Sendable {
            case add
            case later
            case landed
        }
        var name: String { "counter" }
        var inputNames: [String] { ["add", "later"] }
        var outputs: [Output<Int>] { [.int("value") { $0 }] }

        func action(forInput input: String, value: JSONValue) throws(InputError) -> Action {
            let v = InputValue(viewModel: name, input: input, value: value)
            switch input {
            case "add":
                try v.none()
                return .add
            case "later": return .later
            default: throw unknownInput(input)
            }
        }

        func reduce(_ state: inout Int, _ action: Action) -> [Effect<Action>] {
            switch action {
            case .add: state += 1
            case .later: return [.run { .landed }]
            case .landed: state += 10
            }
            return []
        }
    }

    private func store() -> (TestStore<Counter>, () -> [String]) {
        let s = TestStore(feature: Counter(), initialState: 0)
        var failures: [String] = []
        s.fail = { message, _, _ in failures.append(message) }
        return (
            s,
            {
                defer { failures = [] }
                return failures
            }
        )
    }

    func testStatedOutputsPass() {
        let (s, failures) = store()
        s.send("add", outputs: ["value": 1])
        s.send("later")
        s.receive(inputSeq: 2, outputs: ["value": 11])
        s.sendRefused(
            "add", 5,
            error: .invalidValue(
                viewModel: "counter", input: "add", detail: "takes no value (send an empty body or {}), got a number"))
        s.finish()
        XCTAssertEqual(failures(), [])
    }

    func testAnOutputNotStatedOrNotChangedFails() {
        let (s, failures) = store()
        s.send("add")
        XCTAssertEqual(failures().count, 1, "value changed, the test said nothing")
        s.send("later", outputs: ["value": 2])
        XCTAssertEqual(failures().count, 1, "nothing changed, the test said value did")
        s.receive(inputSeq: 2, outputs: ["value": 12])
        XCTAssertEqual(failures().count, 1, "a wrong value")
        s.finish()
        XCTAssertEqual(failures(), [])
    }

    func testAResultNotReceivedAndARefusalThatWasNoneFail() {
        let (s, failures) = store()
        s.sendRefused("add", error: .unknownInput(viewModel: "counter", input: "add", known: []))
        XCTAssertEqual(failures().count, 3, "accepted, it changed the outputs, and its event was not stated")
        s.send("later")
        s.finish()
        XCTAssertEqual(failures().count, 1, "the effect's result was never received")
    }

    func testNoResultWithinTheTimeOutFails() {
        let (s, failures) = store()
        s.receive(inputSeq: nil, outputs: ["value": 1], timeout: 0.05)
        XCTAssertEqual(failures(), ["no effect result came within 0.05 s"])
        s.finish()
    }
}
