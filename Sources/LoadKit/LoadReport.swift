import JSON

/// The result of one scenario run: ordered named values, printed as a human table or as JSON.
///
/// A value; built on the loop thread, printed by the command.
package struct LoadReport: Sendable {
    /// One row of the report.
    package enum Value: Sendable {
        /// A count or other integer.
        case int(Int)
        /// A measurement with a unit shown in the table (`"req/s"`, `"MiB"`, …).
        case number(Double, unit: String)
        /// A latency distribution.
        case latency(LatencySummary)
        /// A note or a status.
        case text(String)
    }

    /// The scenario's name (`latency`, `streams`, …).
    package var scenario: String
    /// The rows in display order; keys are camelCase JSON keys.
    package var rows: [(key: String, value: Value)] = []

    /// An empty report for `scenario`.
    package init(scenario: String) { self.scenario = scenario }

    /// Appends a row.
    package mutating func add(_ key: String, _ value: Value) { rows.append((key, value)) }

    /// The row named `key`, if any.
    package subscript(key: String) -> Value? { rows.first { $0.key == key }?.value }

    /// The integer row named `key`, if any.
    package func int(_ key: String) -> Int? { if case .int(let v)? = self[key] { return v } else { return nil } }

    /// The latency row named `key`, if any.
    package func latency(_ key: String) -> LatencySummary? {
        if case .latency(let v)? = self[key] { return v } else { return nil }
    }

    /// The machine-readable form: `{"scenario":…, key: value…}`.
    package var json: JSONValue {
        var object = JSONObject([("scenario", .string(scenario))])
        for (key, value) in rows {
            switch value {
            case .int(let v): object[key] = .int(v)
            case .number(let v, _): object[key] = .double(v)
            case .latency(let s): object[key] = s.json
            case .text(let t): object[key] = .string(t)
            }
        }
        return .object(object)
    }

    /// The human table.
    package var table: String {
        let width = (rows.map(\.key.count).max() ?? 0) + 2
        var out = "== bff-load \(scenario) ==\n"
        for (key, value) in rows {
            let shown: String
            switch value {
            case .int(let v): shown = "\(v)"
            case .number(let v, let unit): shown = "\(Double(Int(v * 100)) / 100) \(unit)"
            case .latency(let s): shown = s.line
            case .text(let t): shown = t
            }
            out += key.padding(width) + shown + "\n"
        }
        return out
    }
}

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
