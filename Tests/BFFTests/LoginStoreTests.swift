import Foundation
import Logging
import SignIn
import ViewModels
import XCTest

@testable import SearchApp

/// The logins of one process: a sliding lifetime, a bound, the token sealed for its login (in memory and
/// in the file), and a file that cannot be read set aside rather than trusted.
final class LoginStoreTests: XCTestCase {
    final class WallClock: @unchecked Sendable {
        var now = 1_800_000_000.0
    }

    let sealer = try! TokenSealer(base64Key: TokenSealer.newBase64Key())
    var quiet: Logger {
        var l = Logger(label: "test")
        l.logLevel = .critical
        return l
    }

    func person(_ n: Int) -> SignedInPerson {
        SignedInPerson(
            loginKey: LoginCookie.key(of: LoginCookie.newValue()), userID: n, login: "user\(n)", name: nil,
            avatarURL: nil)
    }

    func temporaryPath() -> String { NSTemporaryDirectory() + "bff-logins-\(UUID().uuidString)/logins.json" }

    func testALoginLastsItsTimeFromItsLastUse() throws {
        let clock = WallClock()
        let store = LoginStore(
            path: nil, sealer: sealer, ttl: 100, capacity: 10, logger: quiet, wallClock: { clock.now })
        let p = person(1)
        try store.addNow(p, token: "gho_one")
        clock.now += 90
        XCTAssertEqual(store.touch(p.loginKey)?.login, "user1", "used within its lifetime: renewed")
        clock.now += 90
        XCTAssertEqual(store.tokenNow(forLoginKey: p.loginKey), "gho_one", "180 s after sign-in, 90 after its last use")
        clock.now += 11
        XCTAssertNil(store.tokenNow(forLoginKey: p.loginKey))
        XCTAssertNil(store.touch(p.loginKey))
        XCTAssertEqual(store.count, 0, "an expired login is forgotten when next looked at")
    }

    func testTheTableIsBoundedAndExpiredLoginsMakeRoom() throws {
        let clock = WallClock()
        let store = LoginStore(
            path: nil, sealer: sealer, ttl: 100, capacity: 2, logger: quiet, wallClock: { clock.now })
        try store.addNow(person(1), token: "a")
        clock.now += 60
        let kept = person(2)
        try store.addNow(kept, token: "b")
        XCTAssertThrowsError(try store.addNow(person(3), token: "c")) { error in
            XCTAssertEqual(error as? LoginAddFailure, .full(2))
        }
        clock.now += 50  // the first is 110 s old now
        try store.addNow(person(4), token: "d")
        XCTAssertEqual(store.count, 2)
        XCTAssertEqual(store.tokenNow(forLoginKey: kept.loginKey), "b")
    }

    func testTheFileHoldsSealedTokensAndNoCookieAndAnotherKeyOpensNothing() throws {
        let path = temporaryPath()
        let value = LoginCookie.newValue()
        let p = SignedInPerson(
            loginKey: LoginCookie.key(of: value), userID: 7, login: "mona", name: "Mona", avatarURL: nil)
        let store = LoginStore(path: path, sealer: sealer, ttl: 3600, capacity: 10, logger: quiet)
        try store.addNow(p, token: "gho_PLAINTEXT_TOKEN")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertFalse(text.contains("gho_PLAINTEXT_TOKEN"))
        XCTAssertFalse(text.contains(value), "the cookie's value is not stored, only its key")
        XCTAssertTrue(text.contains(p.loginKey))

        let reopened = LoginStore(path: path, sealer: sealer, ttl: 3600, capacity: 10, logger: quiet)
        XCTAssertEqual(reopened.tokenNow(forLoginKey: p.loginKey), "gho_PLAINTEXT_TOKEN")
        let otherKey = try TokenSealer(base64Key: TokenSealer.newBase64Key())
        let wrong = LoginStore(path: path, sealer: otherKey, ttl: 3600, capacity: 10, logger: quiet)
        XCTAssertNil(wrong.tokenNow(forLoginKey: p.loginKey), "sealed under another BFF_SECRET_KEY")

        XCTAssertEqual(reopened.removeNow(p.loginKey), "gho_PLAINTEXT_TOKEN")
        reopened.flush()
        XCTAssertFalse(try String(contentsOfFile: path, encoding: .utf8).contains(p.loginKey))
    }

    func testAnUnreadableFileIsSetAsideAndTheStoreStartsEmpty() throws {
        let path = temporaryPath()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: path))
        let store = LoginStore(path: path, sealer: sealer, ttl: 3600, capacity: 10, logger: quiet)
        XCTAssertEqual(store.count, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + ".unreadable"))
    }

    func testAKeyOfTheWrongLengthIsRefusedWithoutRepeatingIt() {
        let short = Data(repeating: 7, count: 16).base64EncodedString()
        XCTAssertThrowsError(try SecretKeySource.sealer(environment: short, keyFile: "/nonexistent/secret.key")) {
            let sentence = String(describing: $0)
            XCTAssertTrue(sentence.contains("16 bytes"), sentence)
            XCTAssertFalse(sentence.contains(short))
        }
    }
}
