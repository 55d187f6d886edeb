import Foundation
import XCTest

@testable import SignIn

/// The token at rest: AES-GCM under `BFF_SECRET_KEY`, bound to its login; a key of the wrong length
/// is refused with a sentence that does not repeat it.
final class TokenSealerTests: XCTestCase {
    let token = "gho_SECRETsecretSECRET0123456789"

    func testASealedTokenOpensOnlyWithItsKeyForItsLogin() throws {
        let key = TokenSealer.newBase64Key()
        let sealer = try TokenSealer(base64Key: key)
        let sealed = try sealer.seal(token, for: "login-a")
        XCTAssertTrue(sealed.hasPrefix("v1."))
        XCTAssertFalse(sealed.contains(token), "no plaintext")
        XCTAssertFalse(sealed.contains("SECRET"))
        XCTAssertEqual(sealer.open(sealed, for: "login-a"), token)
        XCTAssertNotEqual(try sealer.seal(token, for: "login-a"), sealed, "a fresh nonce each time")

        XCTAssertNil(sealer.open(sealed, for: "login-b"), "copied to another login's record, it does not open")
        XCTAssertNil(try TokenSealer(base64Key: TokenSealer.newBase64Key()).open(sealed, for: "login-a"))
        var altered = Array(sealed.utf8)
        altered[10] = altered[10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        XCTAssertNil(sealer.open(String(decoding: altered, as: UTF8.self), for: "login-a"))
        XCTAssertNil(sealer.open("v2." + sealed.dropFirst(3), for: "login-a"))
        XCTAssertNil(sealer.open("", for: "login-a"))
    }

    func testAKeyOfTheWrongLengthOrNotBase64IsRefusedWithoutRepeatingIt() {
        let short = Data(repeating: 7, count: 16).base64EncodedString()
        XCTAssertThrowsError(try TokenSealer(base64Key: short)) { error in
            let sentence = "\(error)"
            XCTAssertTrue(sentence.contains("holds 16 bytes; it must hold 32"), sentence)
            XCTAssertFalse(sentence.contains(short), "the key is not repeated")
        }
        XCTAssertThrowsError(try TokenSealer(base64Key: "not base64 at all!")) { error in
            XCTAssertTrue("\(error)".contains("not base64"))
        }
        let unpadded = Data(repeating: 9, count: 32).base64EncodedString().replacingOccurrences(of: "=", with: "")
        XCTAssertNoThrow(try TokenSealer(base64Key: unpadded + "\n"), "padding and a trailing newline are forgiven")
    }
}
