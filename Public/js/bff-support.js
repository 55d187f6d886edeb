// bff-support.js — small helpers shared by the client modules (listeners, fetch answers, backoff).
// Pure functions; main thread only.

/** Adds `callback` to the set under `mapKey` in `map`; returns a function that removes it. */
export function addListener(map, mapKey, callback) {
    let set = map.get(mapKey);
    if (!set) {
        set = new Set();
        map.set(mapKey, set);
    }
    set.add(callback);
    return () => set.delete(callback);
}

/** Calls every listener with `args`; a listener that throws is logged and does not stop the others. */
export function emit(listeners, ...args) {
    if (!listeners) return;
    for (const callback of [...listeners]) {
        try {
            callback(...args);
        } catch (error) {
            console.error("bff-client: a listener threw", error);
        }
    }
}

/** A reconnect/retry delay for `attempt` (1, 2, …): doubling up to `maxMs`, "equal jitter". */
export function backoffDelay(attempt, initialMs, maxMs) {
    const ceiling = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
    return ceiling / 2 + Math.random() * (ceiling / 2);
}

export async function readJSON(response) {
    try {
        return await response.json();
    } catch {
        return null;
    }
}

/** The response's RFC 9457 problem document, or one made up from its status. */
export async function readProblem(response) {
    const body = await readJSON(response);
    if (body && typeof body === "object" && "status" in body) return body;
    return { type: "about:blank", title: response.statusText || "Error", status: response.status,
             detail: `the server answered ${response.status}` };
}

/** A made-up problem for a request that got no answer (`status: 0`). */
export function networkProblem(error) {
    return { type: "about:blank", title: "No answer", status: 0,
             detail: `no answer from the server (${error?.message ?? error})` };
}

/**
 * True for answers worth trying again (an input with the same key, a session creation): the server, or
 * a proxy in front of it, cannot take the request now. `429` is a rate; the others mean a node is
 * unavailable, e.g. a session's owner died and its lease has not ended yet.
 */
export function isRetryable(status) {
    return status === 429 || status === 502 || status === 503 || status === 504;
}

/** True when waiting on this answer (`0`: none) means the server cannot be reached: "reconnecting". */
export function isOutage(status) {
    return status === 0 || status === 502 || status === 503 || status === 504;
}

/** `Retry-After` in milliseconds, or null when absent or not a number of seconds. */
export function retryAfterMs(response) {
    const seconds = Number(response.headers.get("Retry-After"));
    return Number.isFinite(seconds) && seconds >= 0 && response.headers.has("Retry-After") ? seconds * 1000 : null;
}

export function delay(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}
