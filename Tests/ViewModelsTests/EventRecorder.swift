import ViewModels

/// Records every event a view model emits (owner: the test's task).
final class EventRecorder {
    private var events: [ViewModelEvent] = []

    /// Starts recording `viewModel`'s events.
    init(_ viewModel: some ViewModel) {
        viewModel.onEvent = { [unowned self] in self.events.append($0) }
    }

    /// The events recorded since the last call.
    func take() -> [ViewModelEvent] {
        defer { events = [] }
        return events
    }
}
