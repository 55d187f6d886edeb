// bff-load: the load-test tool of the bff server (see docs/LOADTOOL.md). Parses flags and runs
// one LoadKit scenario.
BffLoad.main()
