import GitHubSearch

/// Single flight with cancellable waiters.
///
/// Identical concurrent requests share one upstream call (a `Flight`). A caller waits as one of the
/// flight's waiters; when its task is cancelled it leaves at once (its `search` throws
/// `SearchError.cancelled`) and the others keep waiting. When the last waiter leaves a flight that no
/// background revalidation needs, the upstream task is cancelled: the gateway then leaves the rate
/// limiter's queue without spending a slot if the request was not sent yet, and ignores the
/// cancellation if it was (GitHub has counted it; its answer is still cached when it arrives). A
/// caller that joins a flight cancelled before it was sent gets a fresh upstream call.
extension SearchCache {
    /// One upstream call under way and the callers waiting for it.
    struct Flight {
        var id: Int
        var task: Task<Void, Never>
        var waiters: [Int: CheckedContinuation<Result<SearchPage, SearchError>, Never>] = [:]
        /// A stale-while-revalidate refresh started or joined it: it runs even with no waiter.
        var background: Bool
        /// Its task was cancelled (all waiters left before it finished).
        var cancelled = false
    }

    /// Waits for the single-flight call for `key` (joining the one under way or starting one), or
    /// returns `.cancelled` as soon as the caller's task is cancelled.
    func join(_ request: SearchRequest, key: String) async -> Result<SearchPage, SearchError> {
        if Task.isCancelled { return .failure(.cancelled) }
        startFetch(request, key: key, background: false)
        flightCounter += 1
        let waiter = flightCounter
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                inFlight[key]?.waiters[waiter] = continuation
                waitersChanged(key)
            }
        } onCancel: {
            Task { await self.leave(key: key, waiter: waiter) }
        }
    }

    /// A cancelled waiter leaves; the last one out cancels the upstream call unless a background
    /// revalidation wants it. A no-op when the flight has already answered the waiter.
    func leave(key: String, waiter: Int) {
        guard var flight = inFlight[key], let continuation = flight.waiters.removeValue(forKey: waiter) else { return }
        continuation.resume(returning: .failure(.cancelled))
        if flight.waiters.isEmpty, !flight.background, !flight.cancelled {
            flight.cancelled = true
            flight.task.cancel()
        }
        inFlight[key] = flight
        waitersChanged(key)
    }

    /// Returns once the flight for `request` has exactly `count` waiters (tests await callers joining
    /// and leaving).
    @_spi(Testing) public func waitForWaiters(_ count: Int, request: SearchRequest) async {
        let key = SearchCache.key(request)
        if (inFlight[key]?.waiters.count ?? 0) == count { return }
        await withCheckedContinuation { flightWatchers.add(key, count, $0) }
    }

    private func waitersChanged(_ key: String) {
        flightWatchers.changed(key, to: inFlight[key]?.waiters.count ?? 0)
    }

    /// Starts the upstream call for `key` unless one is under way (then a background start marks it as
    /// needed by a revalidation).
    func startFetch(_ request: SearchRequest, key: String, background: Bool) {
        if inFlight[key] != nil {
            if background { inFlight[key]?.background = true }
            return
        }
        flightCounter += 1
        let id = flightCounter
        inFlight[key] = Flight(id: id, task: upstreamTask(request, key: key, flight: id), background: background)
    }

    private func upstreamTask(_ request: SearchRequest, key: String, flight: Int) -> Task<Void, Never> {
        let cached = entries[key].map { (page: $0.page, etag: $0.etag) }
        let etag = cached?.etag
        let upstream = self.upstream
        return Task {
            let fetched: Result<ConditionalFetch, SearchError>
            do throws(SearchError) {
                if let conditional = upstream as? any ConditionalRepositorySearching {
                    fetched = .success(try await conditional.fetch(request, ifNoneMatch: etag))
                } else {
                    fetched = .success(
                        .modified(try await upstream.search(request, policy: .revalidate).page, etag: nil))
                }
            } catch {
                fetched = .failure(error)
            }
            self.complete(request, key: key, flight: flight, fetched, cached: cached)
        }
    }

    /// The flight's upstream call returned: caches the answer and hands it to every waiter. A call
    /// cancelled before it was sent caches nothing; it is made again if a caller joined meanwhile.
    private func complete(
        _ request: SearchRequest, key: String, flight id: Int, _ fetched: Result<ConditionalFetch, SearchError>,
        cached: (page: SearchPage, etag: String?)?
    ) {
        guard var flight = inFlight[key], flight.id == id else { return }
        if flight.cancelled, case .failure(.cancelled) = fetched {
            if flight.waiters.isEmpty, !flight.background {
                inFlight[key] = nil
            } else {
                flight.cancelled = false
                flight.task = upstreamTask(request, key: key, flight: id)
                inFlight[key] = flight
            }
            return
        }
        inFlight[key] = nil
        let result = finish(request, key: key, fetched, cached: cached)
        for waiter in flight.waiters.values { waiter.resume(returning: result) }
        waitersChanged(key)
    }
}
