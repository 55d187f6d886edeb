import XCTest

@testable import EventHTTP

/// The default thread count follows the CPUs the process may use.
final class CPUBudgetTests: XCTestCase {
    func testTheSmallestLimitDecides() {
        XCTAssertEqual(CPUBudget.decide(online: 8, affinity: 8, quota: nil).count, 8)
        XCTAssertEqual(CPUBudget.decide(online: 8, affinity: 2, quota: nil).count, 2)
        XCTAssertEqual(CPUBudget.decide(online: 8, affinity: 8, quota: (1.5, "cpu.max")).count, 2)
        XCTAssertEqual(CPUBudget.decide(online: 8, affinity: 1, quota: (4, "cpu.max")).count, 1)
        XCTAssertEqual(CPUBudget.decide(online: 8, affinity: 8, quota: (0.2, "cpu.max")).count, 1)
        let b = CPUBudget.decide(online: 2, affinity: 1, quota: nil)
        XCTAssertTrue(b.reason.contains("affinity mask allows 1 of 2"), b.reason)
        let q = CPUBudget.decide(online: 4, affinity: 4, quota: (2, "/sys/fs/cgroup/cpu.max"))
        XCTAssertTrue(q.reason.contains("cgroup CPU quota 2.0 CPUs (/sys/fs/cgroup/cpu.max)"), q.reason)
    }

    func testCgroupFilesAreParsed() {
        XCTAssertNil(CPUBudget.parseCPUMax("max 100000\n"))
        XCTAssertEqual(CPUBudget.parseCPUMax("150000 100000\n"), 1.5)
        XCTAssertNil(CPUBudget.parseCFS(quota: "-1\n", period: "100000\n"))
        XCTAssertEqual(CPUBudget.parseCFS(quota: "200000\n", period: "100000\n"), 2)
    }

    func testTheDefaultIsTheCurrentBudget() {
        XCTAssertEqual(HTTPServer.Configuration().threads, CPUBudget.current.count)
        XCTAssertGreaterThanOrEqual(CPUBudget.current.count, 1)
    }
}
