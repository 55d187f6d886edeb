import XCTest

@testable import SignIn

/// The sign-in rules: where `returnTo` may point, PKCE, the login cookie, the cross-site rule, and the
/// pending sign-ins (good once, for their browser only, for ten minutes, bounded).
final class SignInRulesTests: XCTestCase {
    func testReturnToKeepsOnlyPathsOfThisOrigin() {
        for kept in ["/", "/greeting.html", "/?q=swift&sort=stars", "/a/b#c", "/%2F%2Fevil.example"] {
            XCTAssertEqual(ReturnTo.sanitize(kept), kept, kept)
        }
        for refused in [
            nil, "", "https://evil.example", "//evil.example", "/\\evil.example", "\\\\evil.example",
            "javascript:alert(1)", "evil.example", "/\t/evil.example", "/\n/evil.example", "/a\\b",
            " /leading-space", "/" + String(repeating: "a", count: 2048),
        ] {
            XCTAssertEqual(ReturnTo.sanitize(refused), "/", String(describing: refused))
        }
    }

    func testPKCEChallengeIsTheBase64URLSHA256OfTheVerifier() {
        // Computed apart (Python: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=")).
        XCTAssertEqual(
            PKCE.challenge(for: "dBjftJeZ4CVP-mJ92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtc")
        let v = PKCE.verifier()
        XCTAssertEqual(v.utf8.count, 43, "32 random bytes")
        XCTAssertNotEqual(PKCE.verifier(), v)
        XCTAssertTrue(v.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, v)
    }

    func testTheCookieIsHostPrefixedAndSecureOnlyOnHTTPS() {
        let https = LoginCookie(https: true)
        let value = LoginCookie.newValue()
        XCTAssertEqual(
            https.set(value, maxAge: 1_209_600),
            "__Host-bff-login=\(value); Max-Age=1209600; Path=/; HttpOnly; SameSite=Lax; Secure")
        XCTAssertEqual(https.clear, "__Host-bff-login=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax; Secure")
        let http = LoginCookie(https: false)
        XCTAssertEqual(http.set(value, maxAge: 60), "bff-login=\(value); Max-Age=60; Path=/; HttpOnly; SameSite=Lax")
        XCTAssertNotEqual(LoginCookie.newValue(), value)
    }

    func testTheCookieIsReadOnlyInItsOwnNameAndShape() {
        let c = LoginCookie(https: false)
        let value = LoginCookie.newValue()
        XCTAssertEqual(c.value(inCookieHeaders: ["theme=dark; bff-login=\(value); x=1"]), value)
        XCTAssertEqual(c.value(inCookieHeaders: ["a=b", "bff-login=\(value)"]), value)
        XCTAssertNil(c.value(inCookieHeaders: ["xbff-login=\(value)"]), "another cookie's name")
        XCTAssertNil(c.value(inCookieHeaders: ["bff-login="]))
        XCTAssertNil(c.value(inCookieHeaders: ["bff-login=short"]), "not of the shape the server makes")
        XCTAssertNil(c.value(inCookieHeaders: ["bff-login=\(value.dropLast())\""]))
        XCTAssertNil(
            LoginCookie(https: true).value(inCookieHeaders: ["bff-login=\(value)"]), "https reads __Host- only")
    }

    func testUnsafeRequestsWithTheCookieFromAnotherSiteAreRefused() {
        let origin = "https://bff.example"
        func refuses(_ method: String, cookie: Bool = true, origin o: String? = nil, site: String? = nil) -> Bool {
            CrossSiteRule.refuses(
                method: method, carriesLoginCookie: cookie, origin: o, secFetchSite: site, serverOrigin: origin)
        }
        XCTAssertTrue(refuses("POST", origin: "https://evil.example"))
        XCTAssertTrue(refuses("DELETE", site: "cross-site"))
        XCTAssertTrue(refuses("POST", site: "same-site"), "a sibling subdomain is another origin")
        XCTAssertTrue(refuses("POST", origin: "null"))
        XCTAssertFalse(refuses("POST", origin: "https://BFF.example", site: "same-origin"))
        XCTAssertFalse(refuses("POST", site: "none"), "typed or bookmarked")
        XCTAssertFalse(refuses("POST"), "curl and scripts send neither header")
        XCTAssertFalse(refuses("GET", origin: "https://evil.example"), "safe methods are not judged")
        XCTAssertFalse(refuses("POST", cookie: false, origin: "https://evil.example"), "no cookie, nobody to act as")
    }

    func testAPendingSignInIsGoodOnceForItsBrowserForItsLifetime() throws {
        let pending = PendingSignIns(capacity: 3, lifetime: 600)
        let (state, browser) = try XCTUnwrap(pending.start(returnTo: "/x", verifier: "v1", now: 1000))
        XCTAssertGreaterThanOrEqual(state.utf8.count, 22, "at least 128 random bits")
        XCTAssertNil(pending.take(state: state, browser: "another browser", now: 1001))
        XCTAssertNil(pending.take(state: state, browser: browser, now: 1002), "a failed try spends the state")

        let (s2, b2) = try XCTUnwrap(pending.start(returnTo: "/y", verifier: "v2", now: 1000))
        let taken = try XCTUnwrap(pending.take(state: s2, browser: b2, now: 1599))
        XCTAssertEqual(taken.verifier, "v2")
        XCTAssertEqual(taken.returnTo, "/y")
        XCTAssertNil(pending.take(state: s2, browser: b2, now: 1599), "a replay finds nothing")

        let (s3, b3) = try XCTUnwrap(pending.start(returnTo: "/", verifier: "v3", now: 1000))
        XCTAssertNil(pending.take(state: s3, browser: b3, now: 1600), "ten minutes at most")
        XCTAssertNil(pending.take(state: "forged", browser: b3, now: 1001))
        XCTAssertNil(pending.take(state: s3, browser: nil, now: 1001))
    }

    func testThePendingTableIsBoundedAndMakesRoomOnlyFromExpiredSignIns() throws {
        let pending = PendingSignIns(capacity: 2, lifetime: 600)
        XCTAssertNotNil(pending.start(returnTo: "/", verifier: "a", now: 0))
        let (s, b) = try XCTUnwrap(pending.start(returnTo: "/", verifier: "b", now: 100))
        XCTAssertNil(pending.start(returnTo: "/", verifier: "c", now: 200), "full: refused, nobody pushed out")
        XCTAssertNotNil(pending.start(returnTo: "/", verifier: "d", now: 650), "the first expired: room again")
        XCTAssertEqual(pending.count, 2)
        XCTAssertEqual(pending.take(state: s, browser: b, now: 651)?.verifier, "b", "the live one was kept")
    }
}
