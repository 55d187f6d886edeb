import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// Reads facts about the process under test and this one: server RSS (from `/proc/PID/status`
/// or the server's `/metrics`), metric sums, and the open-file limit.
///
/// Stateless; call from the thread that runs the scenario (it makes blocking requests).
package enum SystemProbe {
    /// Resident set size of `pid` in bytes, from `/proc/PID/status` (`VmRSS`).
    package static func residentBytes(pid: Int32) -> Int? {
        guard let text = readFile("/proc/\(pid)/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if parts.count >= 2, let kb = Int(parts[1]) { return kb * 1024 }
        }
        return nil
    }

    /// The server's RSS: from `pid` when given, else `process_resident_memory_bytes` in `/metrics`.
    package static func serverResidentBytes(target: Target, pid: Int32?) -> (bytes: Int, source: String)? {
        if let pid, let bytes = residentBytes(pid: pid) { return (bytes, "/proc/\(pid)/status") }
        if let value = metricSum(target: target, where: { $0 == "process_resident_memory_bytes" }) {
            return (Int(value), "/metrics")
        }
        return nil
    }

    /// The sum of the samples in the server's `/metrics` whose metric name satisfies `matches`;
    /// `nil` when `/metrics` is unavailable or nothing matched.
    package static func metricSum(target: Target, where matches: (String) -> Bool) -> Double? {
        guard let connection = try? target.connect(timeout: 3),
            let response = try? connection.request("GET", target.basePath + "/metrics"), response.status == 200
        else { return nil }
        connection.close()
        var sum: Double?
        for line in response.text.split(separator: "\n") where !line.hasPrefix("#") {
            let name = line.prefix { $0 != "{" && $0 != " " }
            guard matches(String(name)), let valueText = line.split(separator: " ").last, let value = Double(valueText)
            else { continue }
            sum = (sum ?? 0) + value
        }
        return sum
    }

    /// Raises the soft open-file limit to at least `needed` (up to the hard limit); returns the new soft limit.
    @discardableResult
    package static func raiseOpenFileLimit(to needed: Int) -> Int {
        var limit = rlimit()
        getrlimit(openFilesResource, &limit)
        if limit.rlim_cur < rlim_t(needed) {
            limit.rlim_cur = min(rlim_t(needed), limit.rlim_max)
            setrlimit(openFilesResource, &limit)
            getrlimit(openFilesResource, &limit)
        }
        return Int(limit.rlim_cur)
    }

    /// CPU time (user + system) this process has used, in seconds.
    package static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    private static let openFilesResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

    private static func readFile(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
