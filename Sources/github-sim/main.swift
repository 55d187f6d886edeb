// github-sim: parse flags, build the simulator, serve until SIGINT/SIGTERM (see GitHubSimCommand).
GitHubSimCommand.main()
