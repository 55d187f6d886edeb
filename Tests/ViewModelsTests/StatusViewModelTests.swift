import GitHubSearch
import JSON
import ViewModels
import XCTest

@testable import Features

/// Every output after every update of the shared `status` view model.
final class StatusViewModelTests: XCTestCase {
    func testInitialSnapshotAndUpdates() {
        let vm = StatusViewModel()
        let events = EventRecorder(vm)
        XCTAssertEqual(vm.name, "status")
        XCTAssertEqual(vm.inputNames, [])
        XCTAssertEqual(vm.snapshot.keys, ["reachable", "message", "rateLimit"])
        XCTAssertEqual(vm.snapshot, ["reachable": true, "message": nil, "rateLimit": nil])

        let limit = RateLimit(limit: 30, remaining: 27, resetAt: 1_795_255_200, resource: "search")
        vm.update(UpstreamStatus(reachable: true, message: nil, rateLimit: limit))
        let rateLimitJSON: JSONValue = ["limit": 30, "remaining": 27, "resetAt": "2026-11-21T10:00:00Z"]
        XCTAssertEqual(events.take(), [ViewModelEvent(inputSeq: nil, outputs: ["rateLimit": rateLimitJSON])])
        XCTAssertEqual(vm.snapshot, ["reachable": true, "message": nil, "rateLimit": rateLimitJSON])

        // The same status again: nothing changed, nothing emitted.
        vm.update(UpstreamStatus(reachable: true, message: nil, rateLimit: limit))
        XCTAssertEqual(events.take(), [])

        vm.update(UpstreamStatus(reachable: false, message: "GitHub cannot be reached.", rateLimit: limit))
        XCTAssertEqual(
            events.take(),
            [ViewModelEvent(inputSeq: nil, outputs: ["reachable": false, "message": "GitHub cannot be reached."])])
        XCTAssertEqual(
            vm.snapshot, ["reachable": false, "message": "GitHub cannot be reached.", "rateLimit": rateLimitJSON])

        // A changed resource alone is not an output: no event.
        var other = limit
        other.resource = "core"
        vm.update(UpstreamStatus(reachable: false, message: "GitHub cannot be reached.", rateLimit: other))
        XCTAssertEqual(events.take(), [])

        vm.update(UpstreamStatus())
        XCTAssertEqual(
            events.take(),
            [ViewModelEvent(inputSeq: nil, outputs: ["reachable": true, "message": nil, "rateLimit": nil])])
        XCTAssertEqual(vm.snapshot, ["reachable": true, "message": nil, "rateLimit": nil])
    }

    func testEveryInputIsUnknown() {
        let vm = StatusViewModel()
        let events = EventRecorder(vm)
        XCTAssertThrowsError(try vm.send(input: "reachable", value: false, inputSeq: 1)) {
            XCTAssertEqual($0 as? InputError, .unknownInput(viewModel: "status", input: "reachable", known: []))
            XCTAssertEqual(
                ($0 as? InputError)?.detail, "view model 'status' has no input 'reachable'; it has no inputs")
        }
        XCTAssertEqual(events.take(), [])
        XCTAssertEqual(vm.snapshot, ["reachable": true, "message": nil, "rateLimit": nil])
    }

    /// A reported status reaches it as a notice (`receive`, how the application feeds an app-wide view
    /// model); a notice of another type means nothing to it.
    func testAStatusNoticeReplacesTheStateAndOtherNoticesAreIgnored() {
        let vm = StatusViewModel(initial: UpstreamStatus(reachable: false, message: "down"))
        let events = EventRecorder(vm)
        vm.receive("not a status")
        XCTAssertEqual(events.take(), [])
        vm.receive(UpstreamStatus(reachable: true))
        XCTAssertEqual(events.take(), [ViewModelEvent(inputSeq: nil, outputs: ["reachable": true, "message": nil])])
        XCTAssertEqual(vm.snapshot, ["reachable": true, "message": nil, "rateLimit": nil])
    }

    func testISO8601Formatting() {
        XCTAssertEqual(UTCTimestamp.iso8601(epochSeconds: 0), "1970-01-01T00:00:00Z")
        XCTAssertEqual(UTCTimestamp.iso8601(epochSeconds: 1_795_255_200), "2026-11-21T10:00:00Z")
        XCTAssertEqual(UTCTimestamp.iso8601(epochSeconds: 951_782_400), "2000-02-29T00:00:00Z")
        XCTAssertEqual(UTCTimestamp.iso8601(epochSeconds: 1_709_208_000), "2024-02-29T12:00:00Z")
        XCTAssertEqual(UTCTimestamp.iso8601(epochSeconds: 4_102_444_799), "2099-12-31T23:59:59Z")
        XCTAssertEqual(UTCTimestamp.iso8601(epochSeconds: -1), "1969-12-31T23:59:59Z")
    }
}
