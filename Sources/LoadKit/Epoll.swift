import CEpoll
import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// Linux epoll and timerfd through the `CEpoll` shim (Swift's Glibc module map does not include
/// `<sys/epoll.h>` or `<sys/timerfd.h>`). The shim lays out `struct epoll_event` (packed, 12 bytes, on
/// x86_64; 16 elsewhere): here an event buffer is raw bytes, `eventSize` each.
///
/// Stateless: any thread may call.
enum Epoll {
    static let input = cepoll_in
    static let output = cepoll_out
    static let error = cepoll_err
    static let hangUp = cepoll_hup
    static let readHangUp = cepoll_rdhup
    static let edgeTriggered = cepoll_et
    static let add = cepoll_ctl_add
    static let delete = cepoll_ctl_del

    /// Size of one `struct epoll_event`.
    static let eventSize = Int(cepoll_event_size())

    static func create() throws -> Int32 {
        let fd = cepoll_create()
        guard fd >= 0 else { throw WireError.system("epoll_create1", errno) }
        return fd
    }

    static func control(_ epfd: Int32, _ op: Int32, _ fd: Int32, events: UInt32) {
        _ = cepoll_ctl(epfd, op, fd, events)
    }

    /// Waits for events into `buffer` (capacity `buffer.count / eventSize`); returns the count.
    static func wait(_ epfd: Int32, _ buffer: inout [UInt8], timeoutMilliseconds: Int32) -> Int {
        let capacity = Int32(buffer.count / eventSize)
        return Int(buffer.withUnsafeMutableBytes { cepoll_wait(epfd, $0.baseAddress!, capacity, timeoutMilliseconds) })
    }

    /// The `(events, fd)` of the `index`th event in a buffer filled by `wait`.
    static func event(_ buffer: [UInt8], _ index: Int) -> (events: UInt32, fd: Int32) {
        buffer.withUnsafeBytes { raw in
            var fd: Int32 = -1
            let events = cepoll_event_at(raw.baseAddress!, Int32(index), &fd)
            return (events, fd)
        }
    }

    static func timerCreate() throws -> Int32 {
        let fd = cepoll_timer_create()
        guard fd >= 0 else { throw WireError.system("timerfd_create", errno) }
        return fd
    }

    /// Arms `fd` to fire once at `deadline` (absolute CLOCK_MONOTONIC nanoseconds).
    static func timerArm(_ fd: Int32, deadline: UInt64) {
        _ = cepoll_timer_arm(fd, deadline)
    }
}
