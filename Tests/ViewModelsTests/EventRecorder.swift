import Features
import ViewModels
import XCTest

/// Records every event a view model emits (owner: the test's task).
final class EventRecorder {
    private var events: [ViewModelEvent] = []

    /// Starts recording `viewModel`'s events.
    init(_ viewModel: some ViewModel) {
        let expected = viewModel.name
        viewModel.onEvent = { [unowned self] name, event in
            XCTAssertEqual(name, expected, "an event reports its view model's name")
            self.events.append(event)
        }
    }

    /// The events recorded since the last call.
    func take() -> [ViewModelEvent] {
        defer { events = [] }
        return events
    }
}
