import Crypto
import Foundation

/// Why a `BFF_SECRET_KEY` was refused: the sentence says what a good one is, never the key itself.
public struct SecretKeyError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// Seals a person's GitHub token for storage (a file under `var/`, or Redis) with AES-256-GCM under
/// `BFF_SECRET_KEY`, bound to the login it belongs to (the login id is the AEAD's associated data: a
/// sealed token copied to another login's record does not open there). A sealed token is
/// `v1.` + base64url(nonce ‖ ciphertext ‖ tag); the plaintext appears nowhere in it. Any thread.
public struct TokenSealer: Sendable {
    private let key: SymmetricKey

    /// The key `BFF_SECRET_KEY` holds: 32 bytes, standard base64 (padding optional).
    public init(base64Key: String) throws(SecretKeyError) {
        let trimmed = base64Key.trimmingCharacters(in: .whitespacesAndNewlines)
        var padded = trimmed
        while padded.utf8.count % 4 != 0 { padded += "=" }
        guard let bytes = Data(base64Encoded: padded) else {
            throw SecretKeyError(description: "BFF_SECRET_KEY is not base64 (expected 32 random bytes, base64)")
        }
        guard bytes.count == 32 else {
            throw SecretKeyError(
                description:
                    "BFF_SECRET_KEY holds \(bytes.count) bytes; it must hold 32 (e.g. `openssl rand -base64 32`)")
        }
        key = SymmetricKey(data: bytes)
    }

    /// A key of fresh random bytes, base64 (what a single process writes to its key file).
    public static func newBase64Key() -> String { Data(randomBytes(32)).base64EncodedString() }

    /// `token` sealed for the login `loginID`.
    public func seal(_ token: String, for loginID: String) throws -> String {
        let box = try AES.GCM.seal(Array(token.utf8), using: key, authenticating: Array(loginID.utf8))
        guard let combined = box.combined else { throw CryptoKitError.incorrectParameterSize }
        return "v1." + base64URL(Array(combined))
    }

    /// The token `sealed` holds for `loginID`; nil when it was sealed under another key, for another
    /// login, or altered.
    public func open(_ sealed: String, for loginID: String) -> String? {
        guard sealed.hasPrefix("v1."), let bytes = Self.base64URLDecode(sealed.dropFirst(3)),
            let box = try? AES.GCM.SealedBox(combined: bytes),
            let plain = try? AES.GCM.open(box, using: key, authenticating: Array(loginID.utf8))
        else { return nil }
        return String(decoding: plain, as: UTF8.self)
    }

    static func base64URLDecode(_ s: Substring) -> Data? {
        var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while t.utf8.count % 4 != 0 { t += "=" }
        return Data(base64Encoded: t)
    }
}
