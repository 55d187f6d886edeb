import Foundation
import GitHubSearch

extension SearchCache {
    /// The cache key of a request (also the SQLite primary key). The query part is
    /// `SearchRequest.normalizedQuery`, so `Swift` and ` swift ` share one entry (and one upstream call).
    /// Cluster mode's shared Redis cache uses the same key, so every node and every layer agree.
    public static func key(_ request: SearchRequest) -> String {
        "\(request.sort.rawValue)|\(request.order.rawValue)|\(request.page)|\(request.perPage)|"
            + SearchRequest.normalizedQuery(request.query)
    }

    func insert(_ request: SearchRequest, key: String, page: SearchPage, etag: String?, now: Double) {
        let encoder = JSONEncoder()
        guard let json = try? encoder.encode(page) else { return }
        let bytes = Array(json)
        if let old = entries.removeValue(forKey: key) { totalBytes -= old.pageJSON.count }
        guard bytes.count <= configuration.maxBytes else {
            store?.delete(key: key)
            return  // larger than the whole budget: not cached
        }
        useCounter += 1
        let entry = Entry(request: request, page: page, etag: etag, storedAt: now, pageJSON: bytes, lastUse: useCounter)
        entries[key] = entry
        totalBytes += bytes.count
        persist(key, entry)
        enforceBounds(now: now)
    }

    func persist(_ key: String, _ entry: Entry) {
        store?.put(
            StoredEntry(
                key: key, request: entry.request, page: entry.page, etag: entry.etag, storedAt: entry.storedAt,
                pageJSON: entry.pageJSON, lastUse: entry.lastUse))
    }

    func remove(_ key: String) {
        guard let old = entries.removeValue(forKey: key) else { return }
        totalBytes -= old.pageJSON.count
        store?.delete(key: key)
    }

    /// Drops entries past `maxAge`, then least recently used ones until both bounds hold.
    func enforceBounds(now: Double) {
        let expired = entries.compactMap { now - $0.value.storedAt >= configuration.maxAge ? $0.key : nil }
        for key in expired { remove(key) }
        while entries.count > configuration.maxEntries || totalBytes > configuration.maxBytes {
            guard let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key else { return }
            remove(oldest)
        }
    }
}
