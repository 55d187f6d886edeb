/// BFFKit: everything a package needs to write server-side view models and host them — the view-model
/// kit (`ViewModelFeature`, `Store`, `Effect`, `Output`, `InputValue`, `ViewModelRegistry`), JSON
/// values, and the server (`Application`, `AppConfiguration`) that gives every registered view model
/// sessions, resumable Server-Sent Events streams, one stream per browser, exactly-once inputs, fair use
/// and cluster mode on Redis. One `import BFFKit` brings them all; see docs/VIEW-MODELS.md.
@_exported import BFF
@_exported import JSON
@_exported import Logging
@_exported import ViewModels
