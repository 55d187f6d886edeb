/// A Lua script run with `EVALSHA` (see `RedisConnection.evalScript`), with its SHA-1 computed once.
public struct RedisScript: Sendable, Hashable {
    /// The Lua source.
    public let source: String
    /// Its SHA-1 in lowercase hex: the name Redis caches it under.
    public let sha1: String
    /// `sha1` as a command argument, made once.
    let sha1Argument: RedisArg

    /// A script from its Lua source.
    public init(_ source: String) {
        self.source = source
        sha1 = SHA1.hex(Array(source.utf8))
        sha1Argument = RedisArg(sha1)
    }
}
