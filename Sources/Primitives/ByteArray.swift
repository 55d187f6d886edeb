/// A byte array of `count` bytes written in place by `fill` (which returns how many it wrote, at most
/// `count`). Same bytes as `[UInt8](unsafeUninitializedCapacity:initializingWith:)`, which calls the
/// standard library's unspecialized allocation: it looks up `_ContiguousArrayStorage<UInt8>`'s metadata
/// at run time for every array (docs/BENCHMARKS.md; a cluster node builds several per input: Redis keys,
/// arguments, the command). Small arrays are written on the stack and copied into
/// an array made by the specialized path; large ones, where that copy would cost more, are not.
@inlinable
public func bytesWritten(count: Int, _ fill: (UnsafeMutableBufferPointer<UInt8>) -> Int) -> [UInt8] {
    if count > 1024 {
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, written in written = fill(buffer) }
    }
    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
        let written = fill(buffer)
        return Array(UnsafeBufferPointer(rebasing: buffer[..<written]))
    }
}
