import BFFTesting
import TodoFeature
import XCTest

/// The todo view model, every output after every input (`TestStore`), and hosted by an application as
/// a browser uses it (`TestApplication`: no sockets).
final class TodoTests: XCTestCase {
    func testEveryOutputAfterEveryInput() {
        let store = TestStore(feature: TodoFeature(limit: 2), initialState: .init())
        XCTAssertEqual(store.snapshot, ["items": [], "count": 0])
        store.send("add", "milk", outputs: ["items": [["id": 1, "title": "milk", "done": false]], "count": 1])
        store.send(
            "add", "  eggs ",
            outputs: [
                "items": [["id": 1, "title": "milk", "done": false], ["id": 2, "title": "eggs", "done": false]],
                "count": 2,
            ])
        store.send("add", "bread", signals: ["full": 2])
        store.send(
            "toggle", 1,
            outputs: [
                "items": [["id": 1, "title": "milk", "done": true], ["id": 2, "title": "eggs", "done": false]],
                "count": 1,
            ])
        store.send("toggle", 9)  // no such item: nothing changes
        store.send("remove", 1, outputs: ["items": [["id": 2, "title": "eggs", "done": false]]])
        store.sendRefused(
            "add", "   ",
            error: .invalidValue(viewModel: "todo", input: "add", detail: "expected a title of 1 to 200 characters"))
        store.sendRefused(
            "toggle", "one",
            error: .invalidValue(viewModel: "todo", input: "toggle", detail: "expected an item id, got a string"))
        store.sendRefused(
            "rename", "x", error: .unknownInput(viewModel: "todo", input: "rename", known: ["add", "toggle", "remove"]))
        store.finish()
    }

    func testHostedInASession() throws {
        var viewModels = ViewModelRegistry()
        viewModels.register(TodoFeature.self, initialState: .init()) { _ in TodoFeature() }
        let app = TestApplication(viewModels: viewModels)
        let session = try app.createSession()
        XCTAssertEqual(try app.state(session)["viewModels"], ["todo": ["items": [], "count": 0]])

        let added = app.send(session, "todo", "add", "milk")
        XCTAssertEqual(added.status, 202)
        XCTAssertEqual(added.json?["inputSeq"], 1)
        XCTAssertEqual(try app.state(session)["viewModels"]?["todo"]?["count"], 1)

        let refused = app.send(session, "todo", "add", 42)
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.header("Content-Type"), "application/problem+json")
        XCTAssertEqual(refused.json?["detail"], "invalid value for 'todo/add': expected a string, got a number")
        XCTAssertEqual(app.send(session, "nope", "add", "x").status, 404)
        XCTAssertEqual(try app.state(session)["seq"], 1, "refused inputs change nothing")
    }
}
