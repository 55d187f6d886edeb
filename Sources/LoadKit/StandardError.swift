#if canImport(Glibc)
    import Glibc
#endif

/// Writes to file descriptor 2 (progress lines, warnings). Stateless; any thread.
package enum StandardError {
    /// Writes `text` as UTF-8 to standard error.
    package static func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress!, $0.count) }
    }
}
