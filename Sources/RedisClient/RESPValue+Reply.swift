import CHiredis

extension RESPValue {
    /// Copies a hiredis reply into a Swift value (the reply is freed by hiredis after the callback).
    init(reply r: UnsafePointer<redisReply>) {
        let reply = r.pointee
        func text() -> [UInt8] {
            guard let str = reply.str else { return [] }
            return Array(UnsafeRawBufferPointer(start: str, count: reply.len))  // one copy (`map` went byte by byte)
        }
        switch reply.type {
        case REDIS_REPLY_STRING: self = .bulkString(text())
        case REDIS_REPLY_STATUS: self = .simpleString(String(decoding: text(), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: text(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(Int64(reply.integer))
        case REDIS_REPLY_ARRAY:
            var items: [RESPValue] = []
            items.reserveCapacity(reply.elements)
            for i in 0..<reply.elements {
                if let e = chiredis_element(r, i) { items.append(RESPValue(reply: e)) } else { items.append(.null) }
            }
            self = .array(items)
        default: self = .null
        }
    }
}
