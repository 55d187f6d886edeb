// input-retry.js — when and how long an input is tried again (with the same Idempotency-Key).
//
// One job: the retry policy of the input queue. An answer that says "not now" (`isRetryable` in
// bff-support.js) or no answer at all is tried again after `Retry-After` or a short backoff, within
// one bounded window per input. Main thread only.
import { backoffDelay, retryAfterMs } from "./bff-support.js";

/** The default window: an input is tried for at most this long after its first attempt (ms). */
export const INPUT_RETRY_MS = 30_000;

const BACKOFF_INITIAL_MS = 250;
const BACKOFF_MAX_MS = 4_000;

/**
 * The retry window of one input. `next(attempt, response)` gives the delay before the next try, or
 * null when the window does not allow one: a backoff is cut short at the window's end (one last try
 * there), but a `Retry-After` is honoured, never cut, so one that ends past the window ends the wait.
 */
export class RetryWindow {
    /**
     * @param {number} windowMs
     * @param {() => number} [now]  a monotonic clock in ms
     */
    constructor(windowMs, now = () => performance.now()) {
        this._now = now;
        this.windowMs = windowMs;
        this._deadline = now() + windowMs;
    }

    /** The delay (ms) before try `attempt + 1`, or null to give up. `response` is null without an answer. */
    next(attempt, response) {
        const left = this._deadline - this._now();
        if (left <= 0) return null;
        const asked = response ? retryAfterMs(response) : null;
        if (asked !== null) return asked <= left ? asked : null;
        return Math.min(left, backoffDelay(attempt, BACKOFF_INITIAL_MS, BACKOFF_MAX_MS));
    }
}
