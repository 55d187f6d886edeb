import Histogram
import JSON

/// Latencies in nanoseconds, recorded into an HdrHistogram (3 significant digits, 1 µs to
/// 1 h), summarised as p50/p90/p99/p99.9/max.
///
/// A value type; owned by the scenario on the loop thread.
package struct LatencyHistogram {
    private var histogram = Histogram<UInt64>(
        lowestDiscernibleValue: 1_000, highestTrackableValue: 3_600_000_000_000, numberOfSignificantValueDigits: .three
    )

    /// An empty histogram.
    package init() {}

    /// Records one latency (clamped to the trackable range).
    package mutating func record(nanoseconds: UInt64) {
        _ = histogram.record(min(max(nanoseconds, 1_000), 3_600_000_000_000))
    }

    /// How many values were recorded.
    package var count: Int { Int(histogram.totalCount) }

    /// The summary in microseconds.
    package var summary: LatencySummary {
        guard histogram.totalCount > 0 else { return LatencySummary() }
        func us(_ v: UInt64) -> Double { Double(v) / 1_000 }
        return LatencySummary(
            count: count,
            p50: us(histogram.valueAtPercentile(50)), p90: us(histogram.valueAtPercentile(90)),
            p99: us(histogram.valueAtPercentile(99)), p999: us(histogram.valueAtPercentile(99.9)),
            max: us(histogram.max), mean: histogram.mean / 1_000
        )
    }
}

/// Percentiles of a latency distribution in microseconds. A value; safe anywhere.
package struct LatencySummary: Sendable, Equatable {
    /// Number of samples.
    package var count = 0
    /// Median, µs.
    package var p50 = 0.0
    /// 90th percentile, µs.
    package var p90 = 0.0
    /// 99th percentile, µs.
    package var p99 = 0.0
    /// 99.9th percentile, µs.
    package var p999 = 0.0
    /// Largest sample, µs.
    package var max = 0.0
    /// Mean, µs.
    package var mean = 0.0

    /// `{"count":…, "p50Us":…, …}`.
    package var json: JSONValue {
        .object(
            JSONObject([
                ("count", .int(count)), ("p50Us", .double(p50)), ("p90Us", .double(p90)), ("p99Us", .double(p99)),
                ("p99_9Us", .double(p999)), ("maxUs", .double(max)), ("meanUs", .double(mean)),
            ]))
    }

    /// `p50 212µs  p90 …`, for tables and progress lines.
    package var line: String {
        guard count > 0 else { return "no samples" }
        return "p50 \(Self.format(p50))  p90 \(Self.format(p90))  p99 \(Self.format(p99))  "
            + "p99.9 \(Self.format(p999))  max \(Self.format(max))  (n=\(count))"
    }

    /// Formats microseconds as `µs`, `ms` or `s`.
    package static func format(_ us: Double) -> String {
        if us < 1_000 { return "\(Int(us.rounded()))µs" }
        if us < 1_000_000 { return "\(Double(Int(us / 10)) / 100)ms" }
        return "\(Double(Int(us / 10_000)) / 100)s"
    }
}
