import EventHTTP
import Foundation
import JSON
import RedisClient
import RedisTestSupport
import WireClient
import XCTest

@testable import BFF

/// Forwarding to a live owner: a node that saw another node's live lease forwards the next inputs
/// without asking Redis again (one `acquire` round trip less), falls back to `acquire` when its `SPUBLISH`
/// reaches nobody, and a `moved` answer from a node that no longer runs the session does not hide the
/// answer of the node that does.
class ClusterForwardingTests: ClusterTestCase {
    func testInputsAtANonOwnerAskWhoHoldsTheLeaseOnceThenGoStraightToTheOwner() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        // `PTTL` runs only in `acquire`, when another node holds the lease (not in renewals or commits).
        let before = try calls("pttl")
        for i in 1...10 {
            let r = try name(b, id, "n\(i)")
            XCTAssertEqual(r.status, 202, "\(r)")
            XCTAssertEqual(inputSeq(r), i)
        }
        XCTAssertEqual(try calls("pttl") - before, 1, "one acquire for ten forwarded inputs")
        XCTAssertEqual(try a.state(id)["viewModels"]?["greeting"]?["buttonEnabled"], true)
    }

    func testAForwardThatReachesNobodyAcquiresAgainAndTakesTheSessionOver() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        XCTAssertEqual(inputSeq(try name(b, id, "ann")), 1, "forwarded to A; B remembers A's lease")
        a.app.shutdown()  // releases the lease and unsubscribes: B's next SPUBLISH reaches nobody
        let started = Date()
        let r = try name(b, id, "bob")
        XCTAssertEqual(r.status, 202, "B took the session over instead of answering 503: \(r)")
        XCTAssertEqual(inputSeq(r), 2)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        XCTAssertEqual(try b.state(id)["viewModels"]?["greeting"]?["buttonEnabled"], true)
    }

    /// A holder that no longer runs the session (it left, here as after a failed commit) still takes
    /// inputs on its loop's input channel, and answers `moved` without applying them: the sender asks
    /// Redis again who runs the session, takes it over (the lease is free) and answers `202`, not `503`.
    func testAHolderThatLeftTheSessionAnswersMovedAndTheSenderTakesItOver() throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        XCTAssertEqual(inputSeq(try name(b, id, "ann")), 1, "forwarded to A; B remembers A as the holder")
        let cluster = try XCTUnwrap(a.app.backend as? ClusterNode)
        let owner = try XCTUnwrap(cluster.owner(of: id))
        owner.loop.execute { if let s = owner.sessions[id] { cluster.leave(s) } }
        try waitUntil("A handed the lease over", within: 5) {
            try self.redisCLI("HEXISTS", "bff:s:{\(id)}", "lease").hasPrefix("0")
        }
        let r = try name(b, id, "bob")
        XCTAssertEqual(r.status, 202, "B asked again and took the session over instead of answering 503: \(r)")
        XCTAssertEqual(inputSeq(r), 2)
        XCTAssertEqual(try b.state(id)["viewModels"]?["greeting"]?["buttonEnabled"], true)
    }

    /// Input channels are the holder's, not the session's: creating sessions subscribes nothing new.
    func testCreatingSessionsSubscribesNoNewChannel() throws {
        let a = try node("a")
        _ = try a.createSession()
        let channels = { try self.redisCLI("PUBSUB", "SHARDCHANNELS", "bff:*").split(separator: "\n").count }
        let before = try channels()
        for _ in 0..<10 { _ = try a.createSession() }
        XCTAssertEqual(try channels(), before, "no channel per session")
    }

    func testUnreadableForwardingMessagesAreDroppedAndLoggedWithoutTheirContent() throws {
        let logs = LogCollector()
        let a = try node("a", logger: logs.logger(level: .warning))
        let b = try node("b")
        let id = try a.createSession()
        let cluster = try XCTUnwrap(a.app.backend as? ClusterNode)
        // What a node of another version, or damage, would put on the session's input channel and on
        // every reply channel of `a`: the old JSON form, and a message whose lengths lie.
        let secret = "do-not-log-me"
        _ = try redisCLI(
            "SPUBLISH", cluster.inputChannel(id), #"{"s":"\#(id)","m":"greeting","i":"name","v":"\#(secret)"}"#)
        for channel in cluster.replyChannels { _ = try redisCLI("SPUBLISH", channel, "fr1\n99:\(secret)") }
        try waitUntil("the drop is logged", within: 5) { logs.all.contains("unreadable forwarding message dropped") }
        XCTAssertFalse(logs.all.contains(secret), "a dropped message's content never reaches the log")
        // Nothing was applied, and forwarding between the nodes still works.
        XCTAssertEqual(try a.state(id)["viewModels"]?["greeting"]?["buttonEnabled"], false, "no name was set")
        let r = try name(b, id, "after")
        XCTAssertEqual(r.status, 202, "\(r)")
        XCTAssertEqual(inputSeq(r), 1)
    }

    func testAMovedAnswerFromAnotherReceiverDoesNotHideTheOwnersAnswer() async throws {
        let a = try node("a")
        let b = try node("b")
        let id = try a.createSession()
        let channel = try XCTUnwrap(a.app.backend as? ClusterNode).inputChannel(id)
        // A second subscriber of the session's input channel that answers every input at once with
        // `moved`, as a node does that has just handed the session over and is still unsubscribing.
        let loop = startedLoop()
        defer { loop.stop() }
        let (publisher, subscriber) = await startedClient(redisURL, on: loop)
        let (subscribed, confirm) = AsyncStream<Void>.makeStream()
        loop.execute {
            subscriber.ssubscribe(channel: channel, onSubscribed: { confirm.yield() }) { message in
                guard let (_, replyTo, correlation) = ForwardedInput.decode(message.payload) else { return }
                let bytes = ForwardedReply.encode(correlation: correlation, .failed(.moved), moved: true)
                publisher.send(["SPUBLISH", RedisArg(replyTo), RedisArg(bytes: bytes)], key: RedisArg(replyTo)) { _ in }
            }
        }
        var confirmations = subscribed.makeAsyncIterator()
        _ = await confirmations.next()
        for i in 1...5 {
            let r = try name(b, id, "n\(i)")
            XCTAssertEqual(r.status, 202, "the owner's answer, not the other receiver's moved: \(r)")
            XCTAssertEqual(inputSeq(r), i)
        }
        await close(publisher, subscriber)
    }
}
