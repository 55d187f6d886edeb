import BFF
import Logging
import SearchApp
import WireClient
import XCTest

extension ClusterTestCase {
    /// A whole `Application.live` node (search gateway, shared budget and cache, status board) in cluster
    /// mode on the test's Redis, the GitHub simulator `sim` as its upstream (with the simulator's token),
    /// `github` adjusting the rest; returned once `/readyz` answers 200.
    func liveNode(
        _ name: String, sim: SearchEndToEndTests.Simulator, github: (inout GitHubSettings) -> Void = { _ in }
    ) throws -> LiveApp {
        var c = AppConfiguration()
        c.http.port = 0
        c.http.threads = 2
        c.cluster = ClusterSettings(redisURL: redisURL, nodeID: name)
        var g = GitHubSettings()
        g.baseURL = sim.url
        g.token = SearchEndToEndTests.token
        g.cachePath = nil
        github(&g)
        var quiet = Logger(label: name)
        quiet.logLevel = .error
        let app = try LiveApp(app: Application.live(configuration: c, github: g, logger: quiet))
        try waitUntil("\(name) ready", within: 10) {
            (try? WireConnection.get(port: app.port, path: "/readyz").status) == 200
        }
        return app
    }
}
