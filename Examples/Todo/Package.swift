// swift-tools-version:6.2
// A todo list written as a server-side view model on the bff package's libraries, as a package outside
// it would: it depends on them by path (`../..`) and touches nothing there. See README.md.
import Foundation
import PackageDescription

// A package depended on by path is named after its folder, which is whatever the clone is called.
let bff = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "Todo",
    platforms: [.macOS(.v14)],
    dependencies: [.package(path: "../..")],
    targets: [
        // The view model: one file.
        .target(name: "TodoFeature", dependencies: [.product(name: "BFFKit", package: bff)]),
        // The server: registers it and serves the page in Public/.
        .executableTarget(name: "todo", dependencies: ["TodoFeature", .product(name: "BFFKit", package: bff)]),
        .testTarget(name: "TodoTests", dependencies: ["TodoFeature", .product(name: "BFFTesting", package: bff)]),
    ]
)
