// `bff session-owner …` is its own command (its --redis-url must not be taken by the server's), and so
// is `bff view-models`; anything else is the server.
if CommandLine.arguments.dropFirst().first == "session-owner" {
    SessionOwnerCommand.main(Array(CommandLine.arguments.dropFirst(2)))
} else if CommandLine.arguments.dropFirst().first == "view-models" {
    ViewModelsCommand.main()
} else {
    BFFCommand.main()
}
