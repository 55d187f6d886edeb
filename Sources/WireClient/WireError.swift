#if canImport(Glibc)
    import Glibc
#endif

/// Why a `WireConnection` call or a parser failed. A plain value: safe to pass between threads.
package enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nothing (or not enough) arrived before the deadline.
    case timeout
    /// The peer closed the connection (or reset it) before the expected bytes arrived.
    case closed
    /// The peer sent bytes that are not valid HTTP/1.1 or SSE framing; the string says what.
    case malformed(String)
    /// A system call failed: the call's name and `errno`.
    case system(String, Int32)

    /// A one-line description for test failures and logs.
    package var description: String {
        switch self {
        case .timeout: return "timed out"
        case .closed: return "connection closed by peer"
        case .malformed(let what): return "malformed response: \(what)"
        case .system(let call, let code): return "\(call) failed: \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}
