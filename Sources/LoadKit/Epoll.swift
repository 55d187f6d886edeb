import WireClient

#if canImport(Glibc)
    import Glibc
#endif

/// Linux epoll and timerfd, reached through `dlsym` because Swift's Glibc module map does not
/// include `<sys/epoll.h>` or `<sys/timerfd.h>` (and the package layout has no C shim for
/// LoadKit). The functions are called with the C convention; `epoll_event` is handled as raw
/// bytes with the kernel's layout (packed, 12 bytes, on x86_64; 16 bytes elsewhere).
///
/// Stateless; the function pointers are immutable after first use, so any thread may call.
enum Epoll {
    static let input: UInt32 = 0x001
    static let output: UInt32 = 0x004
    static let error: UInt32 = 0x008
    static let hangUp: UInt32 = 0x010
    static let readHangUp: UInt32 = 0x2000
    static let edgeTriggered: UInt32 = 1 << 31
    static let add: Int32 = 1
    static let delete: Int32 = 2
    static let closeOnExec: Int32 = 0x80000
    static let timerAbsolute: Int32 = 1
    static let nonBlocking: Int32 = 0x800

    #if arch(x86_64)
        /// Size of one `struct epoll_event`.
        static let eventSize = 12
        static let dataOffset = 4
    #else
        static let eventSize = 16
        static let dataOffset = 8
    #endif

    private typealias Create1 = @convention(c) (Int32) -> Int32
    private typealias Ctl = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    private typealias Wait = @convention(c) (Int32, UnsafeMutableRawPointer, Int32, Int32) -> Int32
    private typealias TimerCreate = @convention(c) (Int32, Int32) -> Int32
    private typealias TimerSet =
        @convention(c) (Int32, Int32, UnsafePointer<itimerspec>, UnsafeMutablePointer<itimerspec>?) -> Int32

    private static func symbol<T>(_ name: String, as type: T.Type) -> T {
        guard let pointer = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            fatalError("\(name) not found in libc")
        }
        return unsafeBitCast(pointer, to: type)
    }

    private static let create1Function = symbol("epoll_create1", as: Create1.self)
    private static let ctlFunction = symbol("epoll_ctl", as: Ctl.self)
    private static let waitFunction = symbol("epoll_wait", as: Wait.self)
    private static let timerCreateFunction = symbol("timerfd_create", as: TimerCreate.self)
    private static let timerSetFunction = symbol("timerfd_settime", as: TimerSet.self)

    static func create() throws -> Int32 {
        let fd = create1Function(closeOnExec)
        guard fd >= 0 else { throw WireError.system("epoll_create1", errno) }
        return fd
    }

    static func control(_ epfd: Int32, _ op: Int32, _ fd: Int32, events: UInt32) {
        var raw = [UInt8](repeating: 0, count: 16)
        raw.withUnsafeMutableBytes { buffer in
            buffer.storeBytes(of: events, toByteOffset: 0, as: UInt32.self)
            buffer.storeBytes(of: UInt64(UInt32(bitPattern: fd)), toByteOffset: dataOffset, as: UInt64.self)
            _ = ctlFunction(epfd, op, fd, buffer.baseAddress)
        }
    }

    /// Waits for events into `buffer` (capacity `buffer.count / eventSize`); returns the count.
    static func wait(_ epfd: Int32, _ buffer: inout [UInt8], timeoutMilliseconds: Int32) -> Int {
        let capacity = Int32(buffer.count / eventSize)
        return Int(buffer.withUnsafeMutableBytes { waitFunction(epfd, $0.baseAddress!, capacity, timeoutMilliseconds) })
    }

    /// The `(events, fd)` of the `index`th event in a buffer filled by `wait`.
    static func event(_ buffer: [UInt8], _ index: Int) -> (events: UInt32, fd: Int32) {
        buffer.withUnsafeBytes { raw in
            let events = raw.loadUnaligned(fromByteOffset: index * eventSize, as: UInt32.self)
            let data = raw.loadUnaligned(fromByteOffset: index * eventSize + dataOffset, as: UInt64.self)
            return (events, Int32(truncatingIfNeeded: data))
        }
    }

    static func timerCreate() throws -> Int32 {
        let fd = timerCreateFunction(CLOCK_MONOTONIC, nonBlocking | closeOnExec)
        guard fd >= 0 else { throw WireError.system("timerfd_create", errno) }
        return fd
    }

    /// Arms `fd` to fire once at `deadline` (absolute CLOCK_MONOTONIC nanoseconds).
    static func timerArm(_ fd: Int32, deadline: UInt64) {
        var spec = itimerspec()
        let d = max(deadline, 1)
        spec.it_value = timespec(tv_sec: Int(d / 1_000_000_000), tv_nsec: Int(d % 1_000_000_000))
        _ = timerSetFunction(fd, timerAbsolute, &spec, nil)
    }
}
