// placeholder: filled in by the GitHubSimulator work
