import CLibevent

/// An HTTP request method.
public enum HTTPMethod: String, Sendable, CaseIterable {
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

    /// Every method bit, including libevent's internal "unknown method" bit (1 << 15): evhttp hands
    /// us every request and we answer 405 problem JSON ourselves instead of its HTML 501.
    static let evhttpMask: UInt16 = 0xFFFF
}
