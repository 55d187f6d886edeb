import BFFKit
import Foundation
import TodoFeature

// The composition root: register the view model, serve it and the page until SIGINT/SIGTERM.
var viewModels = ViewModelRegistry()
viewModels.register(TodoFeature.self, initialState: .init()) { _ in TodoFeature(limit: 100) }

var configuration = AppConfiguration()
configuration.http.port = Int(ProcessInfo.processInfo.environment["PORT"] ?? "") ?? 8081
configuration.http.publicDirectory =
    URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../../Public").standardized.path

let signals = ShutdownSignals()  // before any thread starts
let app = Application(
    configuration: configuration, viewModels: viewModels, logger: Logger(label: "todo"))
try app.start()
print("todo listening on http://127.0.0.1:\(app.port)")
fflush(nil)
_ = signals.wait()
app.shutdown()
