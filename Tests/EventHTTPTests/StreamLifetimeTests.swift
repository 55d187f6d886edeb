import WireClient
import XCTest

@testable import EventHTTP

/// A stream and its responder (one `ResponderCore` behind both handles) are freed once the stream is
/// over, whether the server ended it or the peer left, as soon as the handler keeps no reference (the
/// stream and the responder used to keep each other alive: about 290 bytes leaked per stream).
final class StreamLifetimeTests: XCTestCase {
    /// Weak references to the objects of the last stream, filled and checked on the server's loop.
    final class Watch: @unchecked Sendable {
        /// What answered the last request: the object behind its responder and stream handles.
        weak var core: ResponderCore?
        var loop: EventLoop?
        let opened = Signal()
        let closed = Signal()

        /// Whether both objects are gone, asked on the stream's loop after everything queued there.
        func freed() -> Bool {
            final class Answer: @unchecked Sendable {
                var gone = false
                let ready = Signal()
            }
            let answer = Answer()
            loop?.execute {
                answer.gone = self.core == nil
                answer.ready.fire()
            }
            XCTAssertTrue(answer.ready.wait())
            return answer.gone
        }
    }

    func makeServer(_ w: Watch, endAtOnce: Bool) throws -> TestServer {
        try TestServer(routes: { router in
            router.add(.GET, "/stream") { _, responder in
                guard let stream = responder.startStream(headers: [("Content-Type", "text/event-stream")]) else {
                    return
                }
                w.core = responder.core
                w.loop = responder.loop
                stream.onClose = { w.closed.fire() }
                stream.write(Array("data: hello\n\n".utf8))
                if endAtOnce { stream.end() }
                w.opened.fire()
            }
        })
    }

    func testAStreamTheServerEndedIsFreed() throws {
        let w = Watch()
        let t = try makeServer(w, endAtOnce: true)
        let c = try WireConnection(port: t.port)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertNil(try reader.next())  // the end of the chunked body
        XCTAssertTrue(w.opened.wait())
        XCTAssertTrue(w.freed(), "the ended stream or its responder is still alive")
        XCTAssertEqual(try c.request("GET", "/hello").status, 200)
    }

    func testAStreamWhosePeerLeftIsFreed() throws {
        let w = Watch()
        let t = try makeServer(w, endAtOnce: false)
        let c = try WireConnection(port: t.port)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(w.opened.wait())
        XCTAssertFalse(w.freed(), "an open stream is kept by its connection even when the handler keeps none")
        c.close()
        XCTAssertTrue(w.closed.wait(), "the server noticed the peer leaving")
        XCTAssertTrue(w.freed(), "the closed stream or its responder is still alive")
    }

    /// An observer that owns its stream, as a session's stream does (`observeClose` holds it strongly
    /// until the stream closes).
    final class Owner: HTTPStreamCloseObserver {
        var stream: HTTPStream?
        let told: Signal

        init(told: Signal) { self.told = told }

        func httpStreamPeerLeft() { told.fire() }  // keeps its reference: the stream must drop the cycle
    }

    func testAnObserverThatOwnsItsStreamIsToldAndBothAreFreed() throws {
        final class Box: @unchecked Sendable { weak var owner: Owner? }
        let w = Watch()
        let box = Box()
        let t = try TestServer(routes: { router in
            router.add(.GET, "/stream") { _, responder in
                guard let stream = responder.startStream(headers: [("Content-Type", "text/event-stream")]) else {
                    return
                }
                let owner = Owner(told: w.closed)
                owner.stream = stream
                stream.observeClose(with: owner)  // the stream and the connection keep the owner alive
                box.owner = owner
                w.core = responder.core
                w.loop = responder.loop
                stream.write(Array("data: hello\n\n".utf8))
                w.opened.fire()
            }
        })
        let c = try WireConnection(port: t.port)
        let (_, reader) = try c.openEventStream("/stream")
        XCTAssertEqual(try reader.next()?.data, "hello")
        XCTAssertTrue(w.opened.wait())
        XCTAssertFalse(w.freed(), "an open stream is kept by its connection")
        c.close()
        XCTAssertTrue(w.closed.wait(), "the observer was told the peer left")
        XCTAssertTrue(w.freed(), "the closed stream or its responder is still alive")
        XCTAssertNil(box.owner, "the stream kept its observer after closing")
    }
}
