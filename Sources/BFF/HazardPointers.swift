import Synchronization

/// A reference-counted object that other loops may read through an atomic cell without a lock
/// (a `HazardCell`), and whose owner retires it instead of releasing it. It must be `Sendable` (checked:
/// immutable, or atomic), since every loop may read it.
protocol HazardObject: AnyObject, Sendable {}

/// Hazard pointers (Michael, 2004) with one slot per event loop: how an object published in an
/// atomic cell by its owner can be read by any loop without a lock, and freed by the owner only
/// once no loop is in the middle of picking it up.
///
/// A reader announces the pointer it loaded in its loop's slot, checks that the cell still holds
/// it, takes a strong reference and clears the slot: a few atomic operations, no lock, no hop.
/// The owner swaps a new object in and `retire`s the old one; retired objects are released once
/// no slot holds them (a scan reads one slot per loop).
///
/// Threading: `protect(_:slot:)` on loop `slot`'s thread only; `retire`/`reclaim` on the owning
/// loop's thread with that loop's own `RetiredList`.
// @unchecked: its slots are atomics behind a raw pointer, each written by one loop only.
final class HazardDomain: @unchecked Sendable {
    private let slots: UnsafeMutablePointer<Atomic<UInt>>
    let count: Int

    init(loops: Int) {
        count = max(1, loops)
        slots = .allocate(capacity: count)
        for i in 0..<count { (slots + i).initialize(to: Atomic<UInt>(0)) }
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }

    /// A strong reference to the object `cell` holds (nil when empty), taken safely against a
    /// concurrent swap and release by the owner.
    func protect<T: HazardObject>(_ cell: borrowing HazardCell, slot: Int, as type: T.Type) -> T? {
        protect(cell.raw, slot: slot, as: type)
    }

    /// The same for a raw cell holding an object's address, or 0 (nothing) or 1 (a tombstone).
    func protect<T: HazardObject>(_ cell: borrowing Atomic<UInt>, slot: Int, as type: T.Type) -> T? {
        var raw = cell.load(ordering: .acquiring)
        while raw > 1 {
            slots[slot].store(raw, ordering: .sequentiallyConsistent)
            let again = cell.load(ordering: .sequentiallyConsistent)
            if again == raw {
                // Still published, and announced before the owner could scan: it cannot be freed
                // until the slot is cleared, so the retain below is safe.
                let object = Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: raw)!).retain()
                slots[slot].store(0, ordering: .releasing)
                return unsafeDowncast(object.takeRetainedValue(), to: T.self)
            }
            raw = again
        }
        return nil
    }

    /// True when some loop is picking up `raw` right now.
    func isProtected(_ raw: UInt) -> Bool {
        for i in 0..<count where slots[i].load(ordering: .sequentiallyConsistent) == raw { return true }
        return false
    }
}

/// An atomic, owner-written reference to a `HazardObject` (holds one strong reference).
///
/// Threading: `replace` on the owner's loop only; `HazardDomain.protect` from any loop.
struct HazardCell: ~Copyable, Sendable {
    let raw = Atomic<UInt>(0)

    init() {}

    /// Publishes `object` (or empties the cell); the previous object goes to `retired`.
    func replace(with object: (any HazardObject)?, retired: inout RetiredList, domain: HazardDomain) {
        let new = object.map { UInt(bitPattern: Unmanaged<AnyObject>.passRetained($0).toOpaque()) } ?? 0
        let old = raw.exchange(new, ordering: .sequentiallyConsistent)
        if old != 0 { retired.retire(old, domain: domain) }
    }

    /// True when the cell holds nothing. Owner only (a hint for others).
    var isEmpty: Bool { raw.load(ordering: .relaxed) == 0 }

    /// The object, for the owner (which is the only writer, so needs no protection).
    func ownerValue<T: HazardObject>(as type: T.Type) -> T? {
        let r = raw.load(ordering: .relaxed)
        guard r != 0 else { return nil }
        return unsafeDowncast(
            Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: r)!).takeUnretainedValue(), to: T.self)
    }

    deinit {
        let r = raw.load(ordering: .acquiring)
        if r != 0 { Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: r)!).release() }
    }
}

/// Objects an owner swapped out, waiting until no loop holds them in its hazard slot.
/// Owned by one loop.
struct RetiredList {
    private var pending: [UInt] = []

    /// Adds one object (its cell's strong reference); scans once a few have gathered.
    mutating func retire(_ raw: UInt, domain: HazardDomain) {
        pending.append(raw)
        if pending.count >= 2 * domain.count + 8 { reclaim(domain: domain) }
    }

    /// Releases every retired object no loop is picking up.
    mutating func reclaim(domain: HazardDomain) {
        guard !pending.isEmpty else { return }
        var kept: [UInt] = []
        for raw in pending {
            if domain.isProtected(raw) {
                kept.append(raw)
            } else {
                Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: raw)!).release()
            }
        }
        pending = kept
    }

    var count: Int { pending.count }
}
