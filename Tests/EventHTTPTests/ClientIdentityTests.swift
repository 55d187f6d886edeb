import EventHTTP
import JSON
import WireClient
import XCTest

/// Who a request comes from (`HTTPRequest.client`): the peer, or behind a trusted proxy the last
/// untrusted hop of `Forwarded`/`X-Forwarded-For`; and the per-client connection limit, with clients on
/// different loopback addresses (all of 127/8 is loopback).
final class ClientIdentityTests: XCTestCase {
    private func parse(_ s: String) -> String? { ClientAddress(parsing: Substring(s))?.description }

    func testAddressesParseAsHeadersAndFlagsWriteThem() {
        XCTAssertEqual(parse("127.0.0.2"), "127.0.0.2")
        XCTAssertEqual(parse(" 1.2.3.4:5678 "), "1.2.3.4")
        XCTAssertEqual(parse("2001:db8::1"), "2001:db8::1")
        XCTAssertEqual(parse("\"[2001:db8::1]:4711\""), "2001:db8::1")
        XCTAssertEqual(parse("[::1]"), "::1")
        XCTAssertEqual(parse("::ffff:10.0.0.1"), "10.0.0.1", "an IPv4-mapped address is the IPv4 client")
        for bad in ["unknown", "_hidden", "", "1.2.3", "300.1.1.1", "[::1", "a.b.c.d", "1.2.3.4.5"] {
            XCTAssertNil(parse(bad), bad)
        }
    }

    func testTheClientIsTheLastUntrustedHopOnlyBehindATrustedProxy() throws {
        let proxies = try TrustedProxies.parse("10.0.0.0/8, ::1/128,127.0.0.1").get()
        let proxy = try XCTUnwrap(ClientAddress(parsing: "10.1.2.3"))
        let stranger = try XCTUnwrap(ClientAddress(parsing: "198.51.100.7"))
        func client(_ peer: ClientAddress, _ headers: [(String, String)]) -> String {
            proxies.client(peer: peer, headers: headers).description
        }
        // An untrusted peer is its own client, whatever it writes.
        XCTAssertEqual(client(stranger, [("X-Forwarded-For", "1.1.1.1")]), "198.51.100.7")
        XCTAssertEqual(client(stranger, [("Forwarded", "for=1.1.1.1")]), "198.51.100.7")
        // Behind trusted proxies: the last address that is not one of them.
        XCTAssertEqual(client(proxy, [("X-Forwarded-For", "203.0.113.9, 10.0.0.5")]), "203.0.113.9")
        XCTAssertEqual(
            client(proxy, [("X-Forwarded-For", "6.6.6.6, 203.0.113.9")]), "203.0.113.9", "not the spoofable first")
        XCTAssertEqual(
            client(proxy, [("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "203.0.113.9")]), "203.0.113.9",
            "several header lines are one list")
        XCTAssertEqual(
            client(proxy, [("Forwarded", #"for="[2001:db8::1]:4711";proto=https, for=10.0.0.2"#)]), "2001:db8::1")
        XCTAssertEqual(
            client(proxy, [("Forwarded", "for=203.0.113.1"), ("X-Forwarded-For", "6.6.6.6")]), "203.0.113.1",
            "Forwarded wins over X-Forwarded-For")
        // Nothing believable: the proxy itself.
        XCTAssertEqual(client(proxy, []), "10.1.2.3")
        XCTAssertEqual(client(proxy, [("X-Forwarded-For", "10.0.0.9, 10.0.0.5")]), "10.1.2.3", "all hops trusted")
        XCTAssertEqual(client(proxy, [("X-Forwarded-For", "203.0.113.9, garbage")]), "10.1.2.3", "a malformed hop")
        for bad in ["10.0.0.0/33", "x", "::1/129", "1.2.3.4/-1"] {
            XCTAssertThrowsError(try TrustedProxies.parse(bad).get(), bad)
        }
    }

    func testARequestKnowsItsClientAndATrustedProxysClient() throws {
        let t = try TestServer(
            configure: { $0.trustedProxies = try! TrustedProxies.parse("127.0.0.4").get() },
            routes: { $0.get("/who") { req in .json(200, ["client": .string(req.client.description)]) } })
        func who(from source: String, _ headers: [(String, String)] = []) throws -> String? {
            let c = try WireConnection(port: t.port, source: source)
            defer { c.close() }
            return try JSONValue.parse(c.request("GET", "/who", headers: headers).body)["client"]?.stringValue
        }
        XCTAssertEqual(try who(from: "127.0.0.2"), "127.0.0.2")
        XCTAssertEqual(try who(from: "127.0.0.3", [("X-Forwarded-For", "9.9.9.9")]), "127.0.0.3", "not trusted")
        XCTAssertEqual(try who(from: "127.0.0.4", [("X-Forwarded-For", "9.9.9.9")]), "9.9.9.9", "trusted proxy")
        XCTAssertEqual(try who(from: "127.0.0.4"), "127.0.0.4")
    }

    func testAClientPastItsConnectionLimitIsClosedAtOnceAndOthersAreNot() throws {
        let t = try TestServer(configure: { $0.maxConnectionsPerClient = 3 })
        func hello(_ c: WireConnection) throws -> Int { try c.request("GET", "/hello").status }
        var held: [WireConnection] = []
        for _ in 0..<3 {
            let c = try WireConnection(port: t.port, source: "127.0.0.2")
            XCTAssertEqual(try hello(c), 200)  // answered: the server has counted it
            held.append(c)
        }
        let fourth = try WireConnection(port: t.port, source: "127.0.0.2")
        XCTAssertTrue(fourth.waitForClose(timeout: 5), "closed at once, unanswered")
        XCTAssertThrowsError(try hello(fourth))
        // Another client is not affected, and a trusted-proxy-free server counts per address.
        let other = try WireConnection(port: t.port, source: "127.0.0.3")
        XCTAssertEqual(try hello(other), 200)
        // One of the first client's closes: it may open one again.
        held.removeFirst().close()
        // (The server learns of the close from the socket: poll until it has, within a deadline.)
        let deadline = Date().addingTimeInterval(5)
        var admitted = false
        while !admitted, Date() < deadline {
            if let again = try? WireConnection(port: t.port, source: "127.0.0.2"), (try? hello(again)) == 200 {
                admitted = true
            } else {
                usleep(20_000)
            }
        }
        XCTAssertTrue(admitted, "a freed slot is given back")
        _ = held
    }
}
