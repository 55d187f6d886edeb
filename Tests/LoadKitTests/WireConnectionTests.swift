import Foundation
import WireClient
import XCTest

/// WireConnection over real loopback sockets against a scripted server.
final class WireConnectionTests: XCTestCase {
    func testKeepAliveRequestsReuseOneConnectionAndAddHostAndLength() throws {
        let server = try ScriptedServer { request, client in
            let echo =
                "\(request.method) \(request.path) host=\(request.header("Host") ?? "-") "
                + "len=\(request.header("Content-Length") ?? "-") body=\(String(decoding: request.body, as: UTF8.self))"
            client.write("HTTP/1.1 200 OK\r\nContent-Length: \(echo.utf8.count)\r\n\r\n\(echo)")
        }
        defer { server.stop() }
        let connection = try WireConnection(port: server.port)
        let first = try connection.request("GET", "/a")
        XCTAssertEqual(first.text, "GET /a host=127.0.0.1:\(server.port) len=- body=")
        let second = try connection.post("/b", json: "{\"value\":1}")
        XCTAssertEqual(second.text, "POST /b host=127.0.0.1:\(server.port) len=11 body={\"value\":1}")
        XCTAssertEqual(try WireConnection.get(port: server.port, path: "/c").status, 200)
    }

    func testEventStreamIsDechunkedAndParsedAndEndsCleanly() throws {
        let server = try ScriptedServer { _, client in
            client.write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for piece in [
                "retry: 2000\n\nid: 1\nevent: snap", "shot\ndata: {}\n\n", ": keep-alive\n\n",
                "id: 2\nevent: end\ndata: {\"reason\":\"deleted\"}\n\n",
            ] {
                client.write(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n")
            }
            client.write("0\r\n\r\n")
        }
        defer { server.stop() }
        let connection = try WireConnection(port: server.port)
        let (head, reader) = try connection.openEventStream("/events")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("content-type"), "text/event-stream")
        XCTAssertEqual(try reader.next(), SSEEvent(id: "1", event: "snapshot", data: "{}"))
        XCTAssertEqual(try reader.next(), SSEEvent(id: "2", event: "end", data: "{\"reason\":\"deleted\"}"))
        XCTAssertNil(try reader.next())
        XCTAssertEqual(reader.retry, 2000)
        XCTAssertEqual(reader.commentCount, 1)
        XCTAssertFalse(reader.truncated)
    }

    func testEventStreamErrorReturnsWholeProblemBody() throws {
        let server = try ScriptedServer { _, client in
            let body = "{\"status\":404}"
            client.write("HTTP/1.1 404 Not Found\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        }
        defer { server.stop() }
        let (response, reader) = try WireConnection(port: server.port).openEventStream("/nope")
        XCTAssertEqual(response.status, 404)
        XCTAssertEqual(response.text, "{\"status\":404}")
        XCTAssertNil(try reader.next(timeout: 0.1))
    }

    func testTimeoutAndWaitForClose() throws {
        let server = try ScriptedServer { request, client in
            if request.path == "/close" { client.close() }  // never answers /silent
        }
        defer { server.stop() }
        let silent = try WireConnection(port: server.port, timeout: 0.2)
        XCTAssertThrowsError(try silent.request("GET", "/silent")) { XCTAssertEqual($0 as? WireError, .timeout) }
        XCTAssertFalse(silent.waitForClose(timeout: 0.1))
        let closing = try WireConnection(port: server.port)
        try closing.send(raw: "GET /close HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(closing.waitForClose(timeout: 2))
        XCTAssertThrowsError(try closing.readResponse()) { XCTAssertEqual($0 as? WireError, .closed) }
    }

    func testConnectionRefusedIsASystemError() throws {
        let server = try ScriptedServer { _, _ in }
        let port = server.port
        server.stop()
        XCTAssertThrowsError(try WireConnection(port: port)) { error in
            guard case .system(_, let code)? = error as? WireError else { return XCTFail("got \(error)") }
            XCTAssertEqual(code, ECONNREFUSED)
        }
    }
}
