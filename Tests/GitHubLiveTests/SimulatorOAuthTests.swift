import EventHTTP
import Foundation
import GitHubSimulator
import HTTPTesting
import JSON
import Logging
import XCTest

/// The simulator's side of "Sign in with GitHub": the authorize page and form, the code exchange with
/// the client secret and PKCE S256, `/user`, revocation, and a search budget per issued token.
final class SimulatorOAuthTests: XCTestCase {
    let now = 1_800_000_000.0
    let redirect = "http://127.0.0.1:8080/auth/callback"
    let verifier = "dBjftJeZ4CVP-mJ92K27uhbUJU1p1r_wW1gFWFOEjXk"
    /// The S256 challenge of `verifier` (base64url of its SHA-256, computed apart: Python's hashlib).
    let challenge = "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtc"

    func makeSim(rateLimit: Int = 30) -> GitHubSimulator {
        var c = GitHubSimulator.Configuration()
        c.rateLimit = rateLimit
        c.repositories = 200
        return GitHubSimulator(configuration: c)
    }

    func respond(_ sim: GitHubSimulator, _ request: SimRequest, at time: Double? = nil) -> SimResponse {
        guard case .respond(let r, _) = sim.handle(request, now: time ?? now) else {
            XCTFail("no response")
            return SimResponse(status: 0)
        }
        return r
    }

    /// Approves as `login` (the form the authorize page posts); returns the redirect's query items.
    func approve(
        _ sim: GitHubSimulator, as login: String, state: String = "st-1", withChallenge: Bool = true,
        decision: String = "approve"
    ) -> [String: String] {
        var form = "client_id=sim-client-id&redirect_uri=\(encode(redirect))&state=\(state)&login=\(login)"
        form += "&decision=\(decision)"
        if withChallenge { form += "&code_challenge=\(challenge)&code_challenge_method=S256" }
        let r = respond(
            sim,
            SimRequest(
                method: "POST", path: "/login/oauth/authorize",
                headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8)))
        XCTAssertEqual(r.status, 302)
        let location = r.header("Location") ?? ""
        XCTAssertTrue(location.hasPrefix(redirect + "?"), location)
        return Dictionary(
            (URLComponents(string: location)?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { a, _ in a })
    }

    func exchange(
        _ sim: GitHubSimulator, code: String, verifier: String? = nil, secret: String = "sim-client-secret",
        redirectURI: String? = nil, at time: Double? = nil, json: Bool = true
    ) -> SimResponse {
        var form = "client_id=sim-client-id&client_secret=\(secret)&code=\(encode(code))"
        if let verifier = verifier ?? Optional(self.verifier) { form += "&code_verifier=\(verifier)" }
        form += "&redirect_uri=\(encode(redirectURI ?? redirect))"
        return respond(
            sim,
            SimRequest(
                method: "POST", path: "/login/oauth/access_token",
                headers: json ? [("Accept", "application/json")] : [], body: Array(form.utf8)), at: time)
    }

    func encode(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? s }

    func token(_ sim: GitHubSimulator, as login: String) throws -> String {
        let code = try XCTUnwrap(approve(sim, as: login)["code"])
        return try XCTUnwrap(exchange(sim, code: code).json?["access_token"]?.stringValue)
    }

    func search(_ sim: GitHubSimulator, token: String?) -> SimResponse {
        respond(
            sim,
            SimRequest(
                path: "/search/repositories", query: [("q", "swift")],
                headers: [("User-Agent", "t"), ("Host", "sim")]
                    + (token.map { [("Authorization", "Bearer \($0)")] } ?? [])))
    }

    func testTheAuthorizePageCarriesTheRequestIntoItsFormAndRefusesAnUnknownApp() {
        let sim = makeSim()
        let page = respond(
            sim,
            SimRequest(
                path: "/login/oauth/authorize",
                query: [
                    ("client_id", "sim-client-id"), ("redirect_uri", redirect), ("state", "a\"<b"),
                    ("code_challenge", challenge), ("code_challenge_method", "S256"),
                ]))
        XCTAssertEqual(page.status, 200)
        let html = String(decoding: page.body, as: UTF8.self)
        XCTAssertTrue(html.contains(#"id="authorize""#), html)
        XCTAssertTrue(html.contains(#"name="state" value="a&quot;&lt;b""#), "the state is kept, escaped: \(html)")
        XCTAssertTrue(html.contains(#"name="code_challenge" value="\#(challenge)""#))
        let unknown = respond(sim, SimRequest(path: "/login/oauth/authorize", query: [("client_id", "other")]))
        XCTAssertEqual(unknown.status, 404)
        let plain = respond(
            sim,
            SimRequest(
                path: "/login/oauth/authorize",
                query: [("client_id", "sim-client-id"), ("code_challenge", "x"), ("code_challenge_method", "plain")]))
        XCTAssertEqual(plain.status, 400, "only S256 is accepted")
    }

    func testApprovingExchangingAndReadingTheUserWithPKCE() throws {
        let sim = makeSim()
        let back = approve(sim, as: "alice", state: "st-42")
        XCTAssertEqual(back["state"], "st-42")
        let code = try XCTUnwrap(back["code"])
        let answer = exchange(sim, code: code)
        XCTAssertEqual(answer.json?["token_type"]?.stringValue, "bearer")
        XCTAssertEqual(answer.json?["scope"]?.stringValue, "")
        let token = try XCTUnwrap(answer.json?["access_token"]?.stringValue)
        XCTAssertTrue(token.hasPrefix("gho_sim_"))
        let user = respond(sim, SimRequest(path: "/user", headers: [("Authorization", "Bearer \(token)")]))
        XCTAssertEqual(user.status, 200)
        XCTAssertEqual(user.json?["login"]?.stringValue, "alice")
        // The same person has the same id in every login (and another person another).
        let again = try self.token(sim, as: "alice")
        XCTAssertNotEqual(again, token, "each login gets a token of its own")
        let id = user.json?["id"]?.intValue
        XCTAssertEqual(
            respond(sim, SimRequest(path: "/user", headers: [("Authorization", "Bearer \(again)")])).json?["id"]?
                .intValue,
            id)
        let bob = try self.token(sim, as: "bob")
        XCTAssertNotEqual(
            respond(sim, SimRequest(path: "/user", headers: [("Authorization", "Bearer \(bob)")])).json?["id"]?
                .intValue,
            id)
        XCTAssertEqual(respond(sim, SimRequest(path: "/user")).status, 401)
        XCTAssertEqual(sim.stats.requests, 0, "sign-in spends no search budget")
    }

    func testAnExchangeIsRefusedForAWrongSecretVerifierRedirectOrAnExpiredOrReplayedCode() throws {
        let sim = makeSim()
        func error(_ r: SimResponse) -> String? {
            XCTAssertEqual(r.status, 200, "GitHub answers a refused exchange with 200 and an error field")
            XCTAssertNil(r.json?["access_token"])
            return r.json?["error"]?.stringValue
        }
        var code = try XCTUnwrap(approve(sim, as: "alice")["code"])
        XCTAssertEqual(error(exchange(sim, code: code, secret: "wrong")), "incorrect_client_credentials")
        XCTAssertNotNil(exchange(sim, code: code).json?["access_token"], "a refused secret does not spend the code")
        XCTAssertEqual(error(exchange(sim, code: code)), "bad_verification_code", "a code is good once")

        code = try XCTUnwrap(approve(sim, as: "alice")["code"])
        XCTAssertEqual(
            error(exchange(sim, code: code, verifier: "not-the-verifier-not-the-verifier-not-the-v")),
            "bad_verification_code")
        XCTAssertEqual(error(exchange(sim, code: code)), "bad_verification_code", "a failed verifier spends the code")

        code = try XCTUnwrap(approve(sim, as: "alice")["code"])
        XCTAssertEqual(error(exchange(sim, code: code, redirectURI: "http://evil.example/cb")), "redirect_uri_mismatch")

        code = try XCTUnwrap(approve(sim, as: "alice")["code"])
        XCTAssertEqual(
            error(exchange(sim, code: code, at: now + 601)), "bad_verification_code", "codes last 10 minutes")
        XCTAssertEqual(error(exchange(sim, code: "forged")), "bad_verification_code")
        XCTAssertEqual(sim.stats.requests, 0)
    }

    func testCancellingRedirectsBackWithAccessDeniedAndTheState() {
        let sim = makeSim()
        let back = approve(sim, as: "alice", state: "st-9", decision: "deny")
        XCTAssertEqual(back["error"], "access_denied")
        XCTAssertEqual(back["state"], "st-9")
        XCTAssertNil(back["code"])
    }

    func testTheExchangeAnswersFormEncodedUnlessJSONIsAccepted() throws {
        let sim = makeSim()
        let code = try XCTUnwrap(approve(sim, as: "carol")["code"])
        let r = exchange(sim, code: code, json: false)
        XCTAssertEqual(r.header("Content-Type"), "application/x-www-form-urlencoded; charset=utf-8")
        XCTAssertTrue(String(decoding: r.body, as: UTF8.self).hasPrefix("access_token=gho_sim_"))
    }

    func testEachIssuedTokenSearchesOnItsOwnBudgetAndARevokedOneIsRefused() throws {
        let sim = makeSim(rateLimit: 2)
        let alice = try token(sim, as: "alice")
        let bob = try token(sim, as: "bob")
        XCTAssertEqual(search(sim, token: alice).status, 200)
        XCTAssertEqual(search(sim, token: alice).header("X-RateLimit-Remaining"), "0")
        XCTAssertEqual(search(sim, token: alice).status, 403, "alice's budget is spent")
        XCTAssertEqual(search(sim, token: bob).status, 200, "bob's is his own")
        XCTAssertEqual(search(sim, token: nil).status, 200, "the shared budget is untouched by either")
        XCTAssertEqual(search(sim, token: nil).header("X-RateLimit-Remaining"), "0")
        XCTAssertEqual(sim.stats.signedIn, 4)

        let basic = "Basic " + Data("sim-client-id:sim-client-secret".utf8).base64EncodedString()
        func revoke(_ token: String, authorization: String) -> SimResponse {
            respond(
                sim,
                SimRequest(
                    method: "DELETE", path: "/applications/sim-client-id/token",
                    headers: [("Authorization", authorization)],
                    body: JSONValue.object(["access_token": .string(token)]).bytes
                ))
        }
        XCTAssertEqual(revoke(bob, authorization: "Basic bm9wZTpub3Bl").status, 401, "only the app may revoke")
        XCTAssertEqual(revoke(bob, authorization: basic).status, 204)
        XCTAssertEqual(revoke(bob, authorization: basic).status, 404, "already revoked")
        XCTAssertEqual(
            respond(sim, SimRequest(path: "/user", headers: [("Authorization", "Bearer \(bob)")])).status, 401)
        XCTAssertEqual(search(sim, token: bob).status, 401, "GitHub no longer accepts a revoked token")
        XCTAssertEqual(
            respond(sim, SimRequest(path: "/user", headers: [("Authorization", "Bearer \(alice)")])).status, 200,
            "revoking bob's token leaves alice's")
    }

    func testTheRoutesAreMountedOnTheServer() throws {
        var config = HTTPServer.Configuration()
        config.threads = 1
        config.publicDirectory = nil
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let server = HTTPServer(configuration: config, logger: logger)
        let sim = makeSim()
        sim.install(on: server.router)
        let client = InProcessClient(server: server)
        let token = try self.token(sim, as: "dave")
        let basic = "Basic " + Data("sim-client-id:sim-client-secret".utf8).base64EncodedString()
        let revoked = client.request(
            .DELETE, "/applications/sim-client-id/token", headers: [("Authorization", basic)],
            body: JSONValue.object(["access_token": .string(token)]).bytes)
        XCTAssertEqual(revoked.response?.status, 204)
        XCTAssertEqual(client.request(.GET, "/login/oauth/authorize?client_id=sim-client-id").response?.status, 200)
        XCTAssertEqual(client.request(.GET, "/user").response?.status, 401)
    }
}
