import CLibevent

/// An HTTP request method.
public enum HTTPMethod: String, Sendable, CaseIterable {
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // (method names as they appear on the wire)
    case GET, HEAD, POST, PUT, DELETE, OPTIONS, TRACE, CONNECT, PATCH

    init?(command: evhttp_cmd_type) {
        switch command {
        case EVHTTP_REQ_GET: self = .GET
        case EVHTTP_REQ_HEAD: self = .HEAD
        case EVHTTP_REQ_POST: self = .POST
        case EVHTTP_REQ_PUT: self = .PUT
        case EVHTTP_REQ_DELETE: self = .DELETE
        case EVHTTP_REQ_OPTIONS: self = .OPTIONS
        case EVHTTP_REQ_TRACE: self = .TRACE
        case EVHTTP_REQ_CONNECT: self = .CONNECT
        case EVHTTP_REQ_PATCH: self = .PATCH
        default: return nil
        }
    }

    /// Position in `allCases` (0..<9): index into per-method tables without hashing.
    var index: Int {
        switch self {
        case .GET: return 0
        case .HEAD: return 1
        case .POST: return 2
        case .PUT: return 3
        case .DELETE: return 4
        case .OPTIONS: return 5
        case .TRACE: return 6
        case .CONNECT: return 7
        case .PATCH: return 8
        }
    }

    /// Every method bit, including libevent's internal "unknown method" bit (1 << 15): evhttp hands
    /// us every request and we answer 405 problem JSON ourselves instead of its HTML 501.
    static let evhttpMask: UInt16 = 0xFFFF
}
