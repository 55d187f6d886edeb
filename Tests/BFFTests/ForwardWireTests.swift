import EventHTTP
import JSON
import XCTest

@testable import BFF

/// The wire form of forwarded inputs and their answers (`ForwardWire`): what one node writes, another
/// reads back field for field; anything malformed or of another version reads as nil.
final class ForwardWireTests: XCTestCase {
    func testAnInputReadsBackFieldForField() throws {
        let value: JSONValue = .object(["text": .string("a:1\n2 ünï \"q\""), "n": .int(-3), "list": .array([.null])])
        let input = ForwardedInput(
            sessionID: "s-1", viewModel: "search", input: "query", value: value, idempotencyKey: "key:9",
            login: "0123456789abcdef0123456789abcdef")
        let bytes = input.encode(replyTo: "bff:reply:node2#abc#0", correlation: 1_234_567)
        XCTAssertEqual(Array(bytes.prefix(4)), Array("fi2\n".utf8))
        let (decoded, replyTo, correlation) = try XCTUnwrap(ForwardedInput.decode(bytes))
        XCTAssertFalse(decoded.isDelete)
        XCTAssertEqual(decoded.sessionID, "s-1")
        XCTAssertEqual(decoded.viewModel, "search")
        XCTAssertEqual(decoded.input, "query")
        XCTAssertEqual(decoded.value, value)
        XCTAssertEqual(decoded.idempotencyKey, "key:9")
        XCTAssertEqual(decoded.login, "0123456789abcdef0123456789abcdef")
        XCTAssertFalse(decoded.signedOut)
        XCTAssertEqual(replyTo, "bff:reply:node2#abc#0")
        XCTAssertEqual(correlation, 1_234_567)
    }

    func testAnAbsentKeyIsNotAnEmptyKeyAndADeleteIsMarked() throws {
        let noKey = ForwardedInput(sessionID: "s", viewModel: "m", input: "i", value: .string(""), idempotencyKey: nil)
        XCTAssertNil(try XCTUnwrap(ForwardedInput.decode(noKey.encode(replyTo: "r", correlation: 0))).0.idempotencyKey)
        let emptyKey = ForwardedInput(sessionID: "s", viewModel: "m", input: "i", value: .null, idempotencyKey: "")
        XCTAssertEqual(
            try XCTUnwrap(ForwardedInput.decode(emptyKey.encode(replyTo: "r", correlation: 0))).0.idempotencyKey, "")
        let delete = ForwardedInput(
            isDelete: true, sessionID: "s", viewModel: "", input: "", value: .null, idempotencyKey: nil)
        let (decoded, _, correlation) = try XCTUnwrap(
            ForwardedInput.decode(delete.encode(replyTo: "r", correlation: -7)))
        XCTAssertTrue(decoded.isDelete)
        XCTAssertEqual(correlation, -7)
        // A signed-out delete, and an input without a login, keep both apart.
        let signedOut = ForwardedInput(
            isDelete: true, sessionID: "s", viewModel: "", input: "", value: .null, idempotencyKey: nil, login: "k",
            signedOut: true)
        let back = try XCTUnwrap(ForwardedInput.decode(signedOut.encode(replyTo: "r", correlation: 1))).0
        XCTAssertTrue(back.isDelete && back.signedOut)
        XCTAssertEqual(back.login, "k")
        XCTAssertNil(try XCTUnwrap(ForwardedInput.decode(noKey.encode(replyTo: "r", correlation: 0))).0.login)
    }

    func testEveryRunnerAnswerReadsBackWithItsMark() throws {
        let answers: [RunnerAnswer] = [
            .input(.accepted(inputSeq: 12)), .input(.duplicate(inputSeq: 3)),
            .input(.rateLimited(retryAfterSeconds: 2, inputsPerSecond: 50)),
            .input(.unknownViewModel(name: "nope:1", known: ["search", "greeting", "status"])),
            .input(.unknownViewModel(name: "", known: [])),
            .input(.refused(.unknownInput(viewModel: "search", input: "x\n", known: ["query", "sort"]))),
            .input(.refused(.invalidValue(viewModel: "search", input: "sort", detail: "expected one of: \"a\", b"))),
            .deleted, .failed(.notFound), .failed(.sessionLimit(20_000)),
            .failed(.tooManyStreams(limit: 4, clusterWide: true)),
            .failed(.tooManyStreams(limit: 4, clusterWide: false)),
            .failed(.storeUnavailable), .failed(.moved), .failed(.heldElsewhere(seconds: 9)),
            .failed(.runnerDidNotAnswer), .failed(.unreadableState), .failed(.tooLarge(1 << 20)),
        ]
        for answer in answers {
            for moved in [false, true] {
                let bytes = ForwardedReply.encode(correlation: 99, answer, moved: moved)
                XCTAssertEqual(Array(bytes.prefix(4)), Array("fr2\n".utf8))
                let (correlation, decoded, isMoved) = try XCTUnwrap(ForwardedReply.decode(bytes), "\(answer)")
                XCTAssertEqual(correlation, 99)
                XCTAssertEqual(decoded, answer)
                XCTAssertEqual(isMoved, moved)
            }
        }
    }

    func testMalformedOrForeignMessagesReadAsNil() {
        let input = ForwardedInput(sessionID: "s", viewModel: "m", input: "i", value: .string("v"), idempotencyKey: "k")
            .encode(replyTo: "r", correlation: 5)
        let reply = ForwardedReply.encode(
            correlation: 5, .input(.refused(.unknownInput(viewModel: "m", input: "i", known: ["a"]))))
        // Every truncation, one extra byte, and the other message's tag.
        for n in 0..<input.count { XCTAssertNil(ForwardedInput.decode(Array(input.prefix(n))), "prefix \(n)") }
        for n in 0..<reply.count { XCTAssertNil(ForwardedReply.decode(Array(reply.prefix(n))), "prefix \(n)") }
        XCTAssertNil(ForwardedInput.decode(input + [0x20]))
        XCTAssertNil(ForwardedReply.decode(reply + [0x20]))
        XCTAssertNil(ForwardedInput.decode(reply))
        XCTAssertNil(ForwardedReply.decode(input))
        // The JSON form of earlier builds, another version, lengths that lie, a value that is not JSON.
        XCTAssertNil(ForwardedInput.decode(Array(#"{"s":"s","m":"m","i":"i","v":"v","r":"r","c":5}"#.utf8)))
        XCTAssertNil(ForwardedInput.decode(Array("fi1\n".utf8) + input.dropFirst(4)))  // the version without logins
        XCTAssertNil(ForwardedInput.decode(Array("fi2\n0:1:s1:m1:i0:0:1:r1:59999999999:\"v\"".utf8)))
        XCTAssertNil(ForwardedInput.decode(Array("fi2\n0:1:s1:m1:i0:0:1:r1:5x:\"v\"".utf8)))
        XCTAssertNil(ForwardedInput.decode(Array("fi2\n0:1:s1:m1:i0:0:1:r1:51:{".utf8)))
        XCTAssertNil(ForwardedReply.decode(Array("fr1\n0:1:53:2021:1:X".utf8)))  // the HTTP form of earlier builds
        XCTAssertNil(ForwardedReply.decode(Array("fr2\n0:1:51:q".utf8)))  // an unknown kind
        XCTAssertNil(ForwardedReply.decode(Array("fr2\n0:1:51:f7:unknown1:0".utf8)))  // an unknown failure
        XCTAssertNil(ForwardedReply.decode(Array("fr2\n0:1:51:v1:n3:999".utf8)))  // 999 names announced
        XCTAssertNil(ForwardedReply.decode(Array("fr2\n0:0:1:a1:1".utf8)))  // an empty correlation number
        // The well-formed spelling of the same reply reads.
        XCTAssertNotNil(ForwardedReply.decode(Array("fr2\n0:1:51:a1:1".utf8)))
    }
}
