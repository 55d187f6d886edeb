import CLibevent
import Glibc

/// How many CPUs this process may actually use: the smaller of its affinity mask
/// (`sched_getaffinity`) and its cgroup CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
/// `cpu.cfs_period_us`, rounded up), as Go, Java and .NET size their default parallelism in
/// containers. The online CPU count alone overstates it under `taskset` or a container quota:
/// two loops on one CPU make half the requests hop between threads that share it.
public struct CPUBudget: Sendable, CustomStringConvertible {
    /// CPUs the process may use (at least 1).
    public let count: Int
    /// Why: which limit decided ("affinity mask 1 of 2 online CPUs", "cgroup quota …").
    public let reason: String

    /// The budget of the current process, read once.
    public static let current = CPUBudget.detect()

    public var description: String { "\(count) (\(reason))" }

    /// Reads the affinity mask and the cgroup quota of the calling process.
    static func detect() -> CPUBudget {
        let online = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let affinity = affinityCount() ?? online
        let quota = cgroupQuota()
        return decide(online: online, affinity: affinity, quota: quota)
    }

    /// The budget from the three figures (pure: unit-tested). `quota` is a CPU count (fractional
    /// quotas round up: 1.5 CPUs of quota keep 2 loops busy) and its source file.
    static func decide(online: Int, affinity: Int, quota: (cpus: Double, source: String)?) -> CPUBudget {
        var count = max(1, min(online, affinity))
        var reason =
            affinity < online
            ? "affinity mask allows \(affinity) of \(online) online CPUs" : "\(online) online CPUs"
        if let quota {
            let cpus = max(1, Int(quota.cpus.rounded(.up)))
            if cpus < count {
                count = cpus
                reason = "cgroup CPU quota \(quota.cpus) CPUs (\(quota.source)); \(reason)"
            }
        }
        return CPUBudget(count: count, reason: reason)
    }

    /// CPUs in this process's affinity mask, or nil when it cannot be read.
    static func affinityCount() -> Int? {
        let count = Int(clibevent_affinity_cpu_count())
        return count > 0 ? count : nil
    }

    /// The cgroup CPU quota in CPUs, if one is set (v2 first, then v1).
    static func cgroupQuota() -> (cpus: Double, source: String)? {
        var v2Paths = ["/sys/fs/cgroup/cpu.max"]
        if let own = ownCgroupV2Path(), own != "/" { v2Paths.insert("/sys/fs/cgroup\(own)/cpu.max", at: 0) }
        for path in v2Paths {
            if let text = readSmallFile(path) {
                if let cpus = parseCPUMax(text) { return (cpus, path) }
                return nil  // a v2 hierarchy without a quota ("max …")
            }
        }
        for dir in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
            guard let q = readSmallFile("\(dir)/cpu.cfs_quota_us"), let p = readSmallFile("\(dir)/cpu.cfs_period_us")
            else { continue }
            if let cpus = parseCFS(quota: q, period: p) { return (cpus, "\(dir)/cpu.cfs_quota_us") }
            return nil
        }
        return nil
    }

    /// `cpu.max` ("max 100000" or "150000 100000") as CPUs; nil without a quota.
    static func parseCPUMax(_ text: String) -> Double? {
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard parts.count >= 2, let quota = Double(parts[0]), let period = Double(parts[1]), quota > 0, period > 0
        else { return nil }
        return quota / period
    }

    /// v1 `cpu.cfs_quota_us` (-1 means none) over `cpu.cfs_period_us`, as CPUs.
    static func parseCFS(quota: String, period: String) -> Double? {
        guard let q = Double(quota.trimmingHTTPWhitespace()), let p = Double(period.trimmingHTTPWhitespace()), q > 0,
            p > 0
        else { return nil }
        return q / p
    }

    /// The process's cgroup v2 path ("0::/user.slice/…" in /proc/self/cgroup), if any.
    private static func ownCgroupV2Path() -> String? {
        guard let text = readSmallFile("/proc/self/cgroup") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            return String(line.dropFirst(3))
        }
        return nil
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &buf, buf.count)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n], as: UTF8.self)
    }
}
