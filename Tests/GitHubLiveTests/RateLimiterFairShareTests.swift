import Foundation
import GitHubSearch
import XCTest

@testable import GitHubLive

/// The fair share of GitHub's budget (`RateLimiter`, single process) with a manual clock: a client's cap
/// binds only while another client has asked within the horizon (one window by default).
final class RateLimiterFairShareTests: XCTestCase {
    /// GitHub's headers for a window of 30 searches that resets at `reset`.
    func headers(remaining: Int, reset: Double) -> [String: String] {
        [
            "x-ratelimit-limit": "30", "x-ratelimit-remaining": "\(remaining)", "x-ratelimit-reset": "\(Int(reset))",
            "x-ratelimit-resource": "search",
        ]
    }

    /// One call for `client` (nil: charged to nobody): nil when it was allowed (and its slot is given back),
    /// else the error it was refused with.
    func call(_ limiter: RateLimiter, _ client: String?) async -> SearchError? {
        do {
            try await UpstreamClient.$current.withValue(client) { try await limiter.acquire() }
        } catch let error as SearchError {
            return error
        } catch {
            XCTFail("\(error)")
            return nil
        }
        await limiter.release()
        return nil
    }

    /// Calls for `client` until one is refused or `count` were allowed; the number allowed.
    func calls(_ limiter: RateLimiter, _ client: String?, _ count: Int) async -> Int {
        for i in 0..<count where await call(limiter, client) != nil { return i }
        return count
    }

    func isShareRefusal(_ error: SearchError?) -> Bool {
        guard case .rateLimited(_, let message)? = error else { return false }
        return message.hasPrefix("You have used your share of GitHub's search budget")
    }

    func testALoneClientMayStartTheWholeWindowAndCallsChargedToNobodyDoNotMakeItShare() async {
        let clock = ManualClock()
        let refusals = Recorder<Int>()
        let limiter = RateLimiter(
            configuration: .init(minimumSpacing: .zero), clock: clock, onClientRefusal: { refusals.append(1) })
        for i in 0..<30 {
            let error = await call(limiter, "127.0.0.2")
            XCTAssertNil(error, "call \(i + 1) of 30: a client alone is never told to leave room")
            if i % 10 == 0 { _ = await call(limiter, nil) }  // charged to nobody: not another client
            clock.advance(1)
        }
        let counted = await limiter.calls(of: "127.0.0.2")
        XCTAssertEqual(counted, 30, "its calls are counted all the same")
        XCTAssertTrue(refusals.all.isEmpty)
    }

    func testOnceAnotherClientAsksTheHeavyClientStopsAtItsShareAndTheOtherGoesOn() async {
        let clock = ManualClock()
        let refusals = Recorder<Int>()
        let limiter = RateLimiter(
            configuration: .init(minimumSpacing: .zero), clock: clock, onClientRefusal: { refusals.append(1) })
        let start = clock.now()
        _ = await limiter.observe(status: 200, headers: headers(remaining: 30, reset: start + 60))
        let alone = await calls(limiter, "127.0.0.2", 10)
        XCTAssertEqual(alone, 10)
        clock.advance(5)
        let first = await call(limiter, "127.0.0.1")
        XCTAssertNil(first, "the newcomer")
        clock.advance(1)
        let heavy = await calls(limiter, "127.0.0.2", 20)
        XCTAssertEqual(heavy, 5, "up to its share of 15 in all, its calls alone included")
        let refused = await call(limiter, "127.0.0.2")
        XCTAssertTrue(isShareRefusal(refused), "\(String(describing: refused))")
        XCTAssertEqual(refused?.retryAfterSeconds, 54, "until the window ends (before the other's ask is 60 s old)")
        guard case .rateLimited(_, let message)? = refused else { return XCTFail() }
        XCTAssertTrue(message.contains("while others are searching too (15 of the 30 searches"), message)
        let other = await calls(limiter, "127.0.0.1", 14)
        XCTAssertEqual(other, 14, "the other client gets the rest of its share")
        XCTAssertEqual(refusals.all.count, 2, "each refusal counted")
        let blocked = await limiter.blockedError()
        XCTAssertNil(blocked, "a share refusal blocks nobody")
    }

    /// The heavy client spent most of the window before anyone else asked: from the other's first ask on,
    /// the heavy one is over its share and everything left is the other's.
    func testAClientThatSpentMostOfTheWindowAloneIsRefusedFromTheOthersFirstAsk() async {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero), clock: clock)
        _ = await limiter.observe(status: 200, headers: headers(remaining: 30, reset: clock.now() + 60))
        let alone = await calls(limiter, "127.0.0.2", 28)
        XCTAssertEqual(alone, 28)
        let newcomer = await call(limiter, "127.0.0.1")
        XCTAssertNil(newcomer)
        let heavy = await call(limiter, "127.0.0.2")
        XCTAssertTrue(isShareRefusal(heavy), "28 of 30 is past its share once someone else asks")
        let rest = await call(limiter, "127.0.0.1")
        XCTAssertNil(rest, "the last call of the window is the newcomer's")
    }

    /// An ask refused because GitHub's budget is spent still counts: in the next window the heavy client
    /// is capped from its first call, not only once the other client asks again.
    func testAnAskRefusedByGitHubsLimitStillMakesTheNextWindowShared() async {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero), clock: clock)
        let start = clock.now()
        let alone = await calls(limiter, "127.0.0.2", 30)
        XCTAssertEqual(alone, 30)
        _ = await limiter.observe(status: 200, headers: headers(remaining: 0, reset: start + 60))
        clock.advance(20)
        let spent = await call(limiter, "127.0.0.1")
        guard case .rateLimited(_, let message)? = spent else { return XCTFail("\(String(describing: spent))") }
        XCTAssertTrue(message.hasPrefix("GitHub's search rate limit is exhausted"), message)
        clock.advance(41)  // the new window; the other asked 41 s ago
        let heavy = await calls(limiter, "127.0.0.2", 30)
        XCTAssertEqual(heavy, 15, "its share of the new window")
        let refused = await call(limiter, "127.0.0.2")
        XCTAssertEqual(refused?.retryAfterSeconds, 19, "until the other's ask is a window old")
        let other = await calls(limiter, "127.0.0.1", 15)
        XCTAssertEqual(other, 15)
    }

    /// Once nobody else has asked for a horizon, the heavy client is alone again and may go on in the
    /// same window; the refusal's Retry-After said when.
    func testTheCapLiftsWhenTheOthersHaveNotAskedForAHorizon() async {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero), clock: clock)
        _ = await limiter.observe(status: 200, headers: headers(remaining: 30, reset: clock.now() + 3600))
        let other = await call(limiter, "127.0.0.1")
        XCTAssertNil(other)
        clock.advance(10)
        let heavy = await calls(limiter, "127.0.0.2", 30)
        XCTAssertEqual(heavy, 15)
        clock.advance(40)
        let refused = await call(limiter, "127.0.0.2")
        XCTAssertTrue(isShareRefusal(refused))
        XCTAssertEqual(refused?.retryAfterSeconds, 10, "the other asked 50 s ago; the window ends much later")
        clock.advance(10.5)
        let again = await calls(limiter, "127.0.0.2", 5)
        XCTAssertEqual(again, 5, "alone again: not capped, though its window still runs")
        let count = await limiter.calls(of: "127.0.0.2")
        XCTAssertEqual(count, 20)
        let back = await call(limiter, "127.0.0.1")
        XCTAssertNil(back, "the other comes back")
        let capped = await call(limiter, "127.0.0.2")
        XCTAssertTrue(isShareRefusal(capped), "shared again at once")
    }

    func testAShareOfOneNeverRefusesAClient() async {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(minimumSpacing: .zero, clientShare: 1), clock: clock)
        _ = await call(limiter, "127.0.0.1")
        let heavy = await calls(limiter, "127.0.0.2", 30)
        XCTAssertEqual(heavy, 30)
    }
}
