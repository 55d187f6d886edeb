import JSON

/// The simulator's fault switches, settable at start (flags) and at run time (`POST /_sim/faults`).
///
/// Precedence when several are on: `hang`, `serverError`, `primaryRateLimit`, `secondaryRateLimit`,
/// then the real budget, then `malformedJSON` (which corrupts an otherwise good 200 body).
/// `latencyMs` delays every search answer. A plain value.
package struct SimFaults: Sendable, Equatable {
    /// Delay before every search answer, in milliseconds.
    package var latencyMs = 0
    /// Answer searches with `serverErrorStatus` (default 502).
    package var serverError = false
    /// The 5xx status used by `serverError`.
    package var serverErrorStatus = 502
    /// Answer searches with GitHub's primary rate-limit 403 (`X-RateLimit-Remaining: 0`).
    package var primaryRateLimit = false
    /// Answer searches with GitHub's secondary rate-limit 429 and `Retry-After`.
    package var secondaryRateLimit = false
    /// The `Retry-After` seconds of `secondaryRateLimit`.
    package var retryAfterSeconds = 60
    /// Answer searches with a 200 whose body is truncated JSON.
    package var malformedJSON = false
    /// Never answer searches.
    package var hang = false

    /// All switches off.
    package init() {}

    /// The switches as JSON (the body of `GET /_sim/faults`).
    package var json: JSONValue {
        [
            "latencyMs": .int(latencyMs), "serverError": .bool(serverError),
            "serverErrorStatus": .int(serverErrorStatus),
            "primaryRateLimit": .bool(primaryRateLimit), "secondaryRateLimit": .bool(secondaryRateLimit),
            "retryAfterSeconds": .int(retryAfterSeconds), "malformedJSON": .bool(malformedJSON), "hang": .bool(hang),
        ]
    }

    /// Applies the members present in `object`; throws a message naming the first bad member.
    package mutating func merge(_ object: JSONObject) throws(SimError) {
        for (key, value) in object.entries {
            switch key {
            case "latencyMs", "serverErrorStatus", "retryAfterSeconds":
                guard let v = value.intValue, v >= 0 else { throw SimError("\(key) must be a non-negative integer") }
                if key == "latencyMs" {
                    latencyMs = v
                } else if key == "serverErrorStatus" {
                    guard (500...599).contains(v) else { throw SimError("serverErrorStatus must be 500...599") }
                    serverErrorStatus = v
                } else {
                    retryAfterSeconds = v
                }
            case "serverError", "primaryRateLimit", "secondaryRateLimit", "malformedJSON", "hang":
                guard let b = value.boolValue else { throw SimError("\(key) must be a boolean") }
                switch key {
                case "serverError": serverError = b
                case "primaryRateLimit": primaryRateLimit = b
                case "secondaryRateLimit": secondaryRateLimit = b
                case "malformedJSON": malformedJSON = b
                default: hang = b
                }
            case "rateLimit": continue  // handled by GitHubSimulator
            default: throw SimError("unknown fault '\(key)'")
            }
        }
    }
}

/// A bad control request to the simulator.
package struct SimError: Error, Sendable, Equatable {
    /// What was wrong.
    package var message: String
    init(_ message: String) { self.message = message }
}
