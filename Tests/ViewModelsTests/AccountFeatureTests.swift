import BFFTesting
import Features
import GitHubSearch
import JSON
import ViewModels
import XCTest

/// `account` says who a session belongs to and shows that person's own GitHub budget; it takes no input,
/// and an anonymous session's account, or any session's, ignores what is not its person's.
final class AccountFeatureTests: XCTestCase {
    let person = SignedInPerson(
        loginKey: "0123456789abcdef0123456789abcdef", userID: 583231, login: "octocat", name: "The Octocat",
        avatarURL: "https://avatars.githubusercontent.com/u/583231?v=4")
    let budget = RateLimit(limit: 30, remaining: 29, resetAt: 1_800_000_060, resource: "search")

    func testAnAnonymousSessionShowsNobodyAndIgnoresEveryBudget() {
        let store = TestStore(feature: AccountFeature(), initialState: .init(signInEnabled: true))
        XCTAssertEqual(
            store.snapshot,
            [
                "signInEnabled": true, "signedIn": false, "login": nil, "name": nil, "avatarUrl": nil,
                "rateLimit": nil,
            ])
        store.notice(PersonalUpstreamStatus(UpstreamStatus(rateLimit: budget)))
        store.notice(UpstreamStatus(rateLimit: budget))
        store.sendRefused(
            "signIn", error: .unknownInput(viewModel: "account", input: "signIn", known: []))
        store.finish()
    }

    func testASignedInSessionShowsThePersonAndTheirOwnBudgetOnly() {
        let store = TestStore(feature: AccountFeature(), initialState: .init(signInEnabled: true, person: person))
        XCTAssertEqual(store.snapshot["signedIn"], true)
        XCTAssertEqual(store.snapshot["login"], "octocat")
        XCTAssertEqual(store.snapshot["name"], "The Octocat")
        XCTAssertEqual(store.snapshot["avatarUrl"], "https://avatars.githubusercontent.com/u/583231?v=4")
        // The application's budget is not theirs.
        store.notice(UpstreamStatus(rateLimit: budget))
        store.notice(
            PersonalUpstreamStatus(UpstreamStatus(rateLimit: budget)),
            outputs: ["rateLimit": ["limit": 30, "remaining": 29, "resetAt": "2027-01-15T08:01:00Z"]])
        // The same budget again, or one that only names another resource, emits nothing.
        store.notice(PersonalUpstreamStatus(UpstreamStatus(rateLimit: budget)))
        var other = budget
        other.resource = "core"
        store.notice(PersonalUpstreamStatus(UpstreamStatus(rateLimit: other)))
        // A report without a rate limit keeps the last one known.
        store.notice(PersonalUpstreamStatus(UpstreamStatus(reachable: false, message: "down")))
        store.finish()
    }

    func testSignInOffSaysSo() {
        let store = TestStore(feature: AccountFeature(), initialState: .init(signInEnabled: false))
        XCTAssertEqual(store.snapshot["signInEnabled"], false)
        store.finish()
    }

    /// A signed-in session's search follows its person's block, not the application's; an anonymous one
    /// the other way round.
    func testSearchFollowsTheBudgetItSpends() {
        let clock = TestClock()
        let blocked = UpstreamStatus(blockedUntil: 1_800_000_040)
        let own = TestStore(
            feature: SearchFeature(searcher: FakeSearch(), clock: clock, ownBudget: true), initialState: SearchState())
        own.send("query", "swift", outputs: ["query": "swift", "searchEnabled": true])
        own.notice(blocked)
        own.notice(
            PersonalUpstreamStatus(blocked), outputs: ["searchEnabled": false, "retryAt": "2027-01-15T08:00:40Z"])
        own.notice(PersonalUpstreamStatus(UpstreamStatus()), outputs: ["searchEnabled": true, "retryAt": nil])
        own.finish()

        let shared = TestStore(
            feature: SearchFeature(searcher: FakeSearch(), clock: clock), initialState: SearchState())
        shared.send("query", "swift", outputs: ["query": "swift", "searchEnabled": true])
        shared.notice(PersonalUpstreamStatus(blocked))
        shared.notice(blocked, outputs: ["searchEnabled": false, "retryAt": "2027-01-15T08:00:40Z"])
        shared.notice(UpstreamStatus(), outputs: ["searchEnabled": true, "retryAt": nil])
        shared.finish()
    }
}
