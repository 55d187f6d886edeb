import Features
import GitHubSearch
import JSON
import ViewModels

/// `bff view-models`: prints the view models this server hosts, as JSON — each one's name, scope, input
/// names and state outputs, in snapshot order: `{"viewModels": [{"name", "scope", "inputs", "outputs"}]}`.
/// `.ci/check-openapi.sh` checks `Public/openapi.yaml` against it, so the schema follows the code.
enum ViewModelsCommand {
    static func main() {
        let registry = ViewModelRegistry.product(search: NoSearch(), pageSize: 30)
        let context = ViewModelContext(executor: { _ in }, client: nil)
        var list: [JSONValue] = []
        for (scope, name) in [(ViewModelScope.session, "session"), (.app, "app")] {
            for vm in registry.make(scope, context) {
                list.append([
                    "name": .string(vm.name), "scope": .string(name),
                    "inputs": .array(vm.inputNames.map(JSONValue.string)),
                    "outputs": .array(vm.snapshot.keys.map(JSONValue.string)),
                ])
                vm.close()
            }
        }
        print(String(decoding: JSONValue.object(["viewModels": .array(list)]).bytes, as: UTF8.self))
    }

    /// A search model for view models that are only described, never run.
    struct NoSearch: RepositorySearching {
        func search(_ request: SearchRequest, policy: CachePolicy) async throws(SearchError) -> SearchResponse {
            throw .unavailable(message: "not searching")
        }
    }
}
