import WireClient

/// A small pool of keep-alive connections for request/response traffic. Requests queue when
/// every connection is busy (one request in flight per connection, no pipelining); a closed
/// connection fails its in-flight request and is replaced on the next request.
///
/// Touched only on its loop's thread.
package final class RequestPool {
    /// How a request ended.
    package typealias Completion = (Result<WireResponse, WireError>) -> Void

    private struct Pending {
        var bytes: [UInt8]
        var completion: Completion
    }

    private final class Slot {
        var connection: LoadConnection?
        var inFlight: Pending?
        var response: WireResponse?
    }

    private let loop: LoadLoop
    /// Where its connections go (and from where).
    let target: Target
    private var slots: [Slot]
    private var queue: [Pending] = []
    private var queueHead = 0
    private let hostLine: [UInt8]

    /// Connections this pool may open (its requests in flight at most).
    package var size: Int { slots.count }

    /// A pool of up to `size` connections to `target`, opened lazily.
    package init(loop: LoadLoop, target: Target, size: Int) {
        self.loop = loop
        self.target = target
        slots = (0..<max(1, size)).map { _ in Slot() }
        hostLine = Array(" HTTP/1.1\r\nHost: \(target.host):\(target.port)\r\n".utf8)
    }

    deinit {
        // The connections' callbacks point at this pool and its slots: silence them before
        // closing, in case the pool goes away while its connections are still registered.
        for slot in slots {
            guard let connection = slot.connection else { continue }
            connection.onEvent = { _ in }
            connection.onClose = { _ in }
            connection.close()
        }
    }

    /// Requests waiting for a free connection.
    package var queued: Int { queue.count - queueHead }

    /// Sends a request when a connection is free; `completion` runs on the loop.
    package func submit(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
        completion: @escaping Completion
    ) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256 + (body?.count ?? 0))
        bytes += method.utf8
        bytes.append(0x20)
        bytes += target.basePath.utf8
        bytes += path.utf8
        bytes += hostLine
        for (name, value) in headers {
            bytes += name.utf8
            bytes += [0x3A, 0x20]
            bytes += value.utf8
            bytes += [0x0D, 0x0A]
        }
        if body != nil || method == "POST" {
            bytes += "Content-Length: ".utf8
            bytes += String(body?.count ?? 0).utf8
            bytes += [0x0D, 0x0A]
        }
        bytes += [0x0D, 0x0A]
        if let body { bytes += body }
        queue.append(Pending(bytes: bytes, completion: completion))
        dispatch()
    }

    /// Closes every connection; in-flight requests fail with `.closed`.
    package func close() {
        for slot in slots { slot.connection?.close(.closed) }
    }

    private func dispatch() {
        for slot in slots where slot.inFlight == nil {
            guard queueHead < queue.count else { break }
            let next = queue[queueHead]
            queueHead += 1
            start(next, on: slot)
        }
        if queueHead > 1024 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    private func start(_ pending: Pending, on slot: Slot) {
        slot.inFlight = pending
        if slot.connection == nil || slot.connection!.isClosed {
            do {
                slot.connection = try open(slot)
            } catch {
                slot.inFlight = nil
                slot.connection = nil
                // Never call the completion from inside `submit`: a closed-loop caller resubmits
                // from it, and with a persistent failure (EMFILE) that would recurse without bound.
                let failure = error as? WireError ?? .closed
                loop.schedule(after: 0) { pending.completion(.failure(failure)) }
                loop.schedule(after: 0.01) { [weak self] in self?.dispatch() }
                return
            }
        }
        slot.connection!.send(pending.bytes)
    }

    private func open(_ slot: Slot) throws -> LoadConnection {
        let connection = try LoadConnection(loop: loop, target: target)
        connection.onEvent = { [unowned self, unowned slot] event in
            switch event {
            case .head(let head): slot.response = head
            case .body(let bytes): slot.response?.body.append(contentsOf: bytes)
            case .end:
                guard let response = slot.response, let pending = slot.inFlight else { return }
                slot.response = nil
                slot.inFlight = nil
                // Retire a connection the server is closing before the completion runs, so a
                // request submitted from the completion gets a fresh connection, not this one.
                if response.header("Connection")?.lowercased() == "close" { slot.connection?.close() }
                pending.completion(.success(response))
                self.dispatch()
            }
        }
        connection.onClose = { [unowned self, unowned slot] error in
            slot.connection = nil
            slot.response = nil
            if let pending = slot.inFlight {
                slot.inFlight = nil
                pending.completion(.failure(error ?? .closed))
            }
            self.loop.schedule(after: 0) { [weak self] in self?.dispatch() }
        }
        return connection
    }
}
