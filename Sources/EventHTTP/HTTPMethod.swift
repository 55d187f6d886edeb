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

    /// Every method evhttp may hand us (we answer 405 ourselves rather than evhttp's 501).
    static let evhttpMask: UInt16 = {
        let all: [evhttp_cmd_type] = [
            EVHTTP_REQ_GET, EVHTTP_REQ_HEAD, EVHTTP_REQ_POST, EVHTTP_REQ_PUT, EVHTTP_REQ_DELETE,
            EVHTTP_REQ_OPTIONS, EVHTTP_REQ_TRACE, EVHTTP_REQ_CONNECT, EVHTTP_REQ_PATCH,
        ]
        return all.reduce(0) { $0 | UInt16($1.rawValue) }
    }()
}
