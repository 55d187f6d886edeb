import JSON

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Converts `Codable` view-model state to and from JSON through Foundation's JSON coder.
///
/// Why Foundation and not a hand-written `Encoder`: the synthesized, compiler-checked `Codable`
/// conformances with no bespoke encoder to maintain. Cluster mode stores a session's state on every
/// commit, but only the view models whose state changed are encoded again (`StoredFormMemo`), and a
/// feature whose state changes on almost every input writes it by hand (`ViewModelFeature.durableJSON`).
/// `FoundationEssentials` (no ICU) where available. Pure functions; any thread.
enum DurableCoding {
    /// `value` as JSON text, straight from `JSONEncoder`. Its object members may come in any order
    /// (Foundation's keyed containers do not keep one, even between two calls); readers parse it. Our
    /// state types contain no non-finite doubles or non-string keys, so encoding cannot fail; a failure
    /// is a programming error.
    static func encodeBytes<T: Encodable>(_ value: T) -> [UInt8] {
        do {
            return Array(try JSONEncoder().encode(value))
        } catch {
            preconditionFailure("durable state of type \(T.self) does not encode: \(error)")
        }
    }

    /// A `T` decoded from `json`; a `malformed` error naming the field otherwise.
    static func decode<T: Decodable>(_ type: T.Type, from json: JSONValue, viewModel: String)
        throws(DurableStateError) -> T
    {
        do {
            return try JSONDecoder().decode(T.self, from: Data(json.bytes))
        } catch let error as DecodingError {
            throw .malformed(viewModel: viewModel, detail: describe(error))
        } catch {
            throw .malformed(viewModel: viewModel, detail: "\(error)")
        }
    }

    /// "state.repositories[0].stars: expected Int" and the like.
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            var text = "state"
            for key in keys {
                if let index = key.intValue { text += "[\(index)]" } else { text += "." + key.stringValue }
            }
            return text
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])): missing"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)): expected \(type)"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)): expected \(type), got null"
        case .dataCorrupted(let context):
            return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
