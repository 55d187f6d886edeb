// placeholder: filled in by the GitHubLive work
