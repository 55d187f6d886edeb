import Features
import Foundation
import JSON
import ViewModels
import XCTest

@testable import BFF

/// The stored state of a cluster commit, assembled from each view model's memoized parts, is the
/// document it replaces (it parses to the same value: older nodes read it, and a node reads what they
/// wrote; `JSONEncoder` never kept the members of an object in one order, so the bytes never were
/// stable), and a commit that changes one view model encodes only that one.
final class ClusterStoredStateTests: XCTestCase {
    /// The stored state as it was built before the memos: one `JSONValue`, serialized.
    private static func reference(_ s: Session) -> [UInt8] {
        var durable = JSONObject()
        var outputs = JSONObject()
        for vm in s.viewModels {
            durable[vm.name] = vm.durableState
            outputs[vm.name] = .object(vm.snapshot)
        }
        return JSONValue.object([
            "version": .int(Session.durableVersion), "viewModels": .object(durable), "outputs": .object(outputs),
        ]).bytes
    }

    func testTheAssembledStateIsTheDocumentItReplacesAndOnlyChangedViewModelsAreEncoded() throws {
        let t = try LiveApp()
        let id = try t.createSession()
        let kept = Memos()
        /// (assembled, reference, encodings per view model) on the session's loop.
        func commitNow() throws -> ([UInt8], [UInt8], [Int]) {
            try t.onOwner(of: id) { s in
                (s.storedForm(memos: &kept.memos), Self.reference(s), kept.memos.map(\.encodings))
            }
        }
        var (bytes, reference, first) = try commitNow()
        XCTAssertEqual(try JSONValue.parse(bytes), try JSONValue.parse(reference))
        XCTAssertEqual(first, [1, 1, 1], "search, greeting, account")
        (bytes, reference, first) = try commitNow()
        XCTAssertEqual(try JSONValue.parse(bytes), try JSONValue.parse(reference))
        XCTAssertEqual(first, [1, 1, 1], "nothing changed: nothing encoded")

        _ = try t.post(id, "greeting", "name", #"{"value":"ann \"quoted\" / ü"}"#)
        let (afterName, referenceAfterName, encodings) = try commitNow()
        XCTAssertEqual(try JSONValue.parse(afterName), try JSONValue.parse(referenceAfterName))
        XCTAssertNotEqual(try JSONValue.parse(afterName), try JSONValue.parse(bytes))
        XCTAssertEqual(encodings.reduce(0, +), 4, "one view model changed, one encoded again: \(encodings)")
        _ = try t.post(id, "search", "query", #"{"value":"swift"}"#)
        _ = try t.post(id, "greeting", "greet")
        let (last, referenceLast, _) = try commitNow()
        XCTAssertEqual(try JSONValue.parse(last), try JSONValue.parse(referenceLast))
        XCTAssertNotNil(try JSONValue.parse(last)["outputs"]?["greeting"]?["label"])
    }
}

/// The memos a test keeps between "commits" (used on the session's loop only).
private final class Memos: @unchecked Sendable {
    var memos: [StoredFormMemo] = []
}
