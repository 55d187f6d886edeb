// input-queue.js — the page's inputs, POSTed one at a time in the order the user made them.
//
// One job: deliver each input exactly once. Each input has its own Idempotency-Key (one per session),
// kept across its retries; "not now" answers and network failures are retried within a bounded window
// (input-retry.js); an input whose session is gone goes to the new session, after what the user has
// entered (the page's carry-over). Replies carry no view state: outputs arrive on the stream. Knows
// nothing of the stream transport. Main thread only.
import { delay, emit, isOutage, isRetryable, networkProblem, readJSON, readProblem } from "./bff-support.js";
import { RetryWindow } from "./input-retry.js";

export class InputQueue {
    /**
     * @param {object} deps
     * @param {(path: string) => string} deps.url
     * @param {import("./session.js").Session} deps.session
     * @param {() => number} deps.retryWindowMs          how long one input is retried (ms)
     * @param {Set<Function>} deps.errorListeners       `onError` listeners
     * @param {Set<Function>} deps.sentListeners        `onSent` listeners
     * @param {(stalled: boolean) => void} deps.setStalled  an input waits for the server to come back
     * @param {() => Array<[string, string, *]>} deps.carryOver  what the user has entered, as inputs
     */
    constructor(deps) {
        this._deps = deps;
        this._queue = [];
        this._pumping = false;
        this._carryOverDue = false; // inputs were given up: send the carry-over before anything else
    }

    /** Queues an input (see `BffClient.send`); resolves `{ok, inputSeq}` or `{ok: false, problem}`. */
    send(viewModel, input, value, options = {}) {
        return new Promise((resolve) => {
            if (this._carryOverDue) this._queueCarryOver();
            const last = this._queue[this._queue.length - 1];
            if (options.coalesce && last && !last.started && last.viewModel === viewModel && last.input === input) {
                last.value = value;
                last.waiters.push(resolve);
                return;
            }
            this._queue.push(newItem(viewModel, input, value, resolve));
            this._pump();
        });
    }

    /**
     * Sends the page's carry-over (what the user has entered) ahead of every input still waiting: a new
     * session replaced a lost one, or the server answers again after inputs were given up.
     */
    resync() {
        this._queueCarryOver();
        this._pump();
    }

    /** True when inputs were given up and the carry-over has not been sent since. */
    get carryOverDue() {
        return this._carryOverDue;
    }

    _queueCarryOver() {
        this._carryOverDue = false;
        const items = this._deps.carryOver().map(([viewModel, input, value]) => newItem(viewModel, input, value));
        // In front of everything: an input in flight to a lost session is sent again after these.
        this._queue.unshift(...items);
    }

    async _pump() {
        if (this._pumping) return;
        this._pumping = true;
        try {
            while (this._queue.length > 0) {
                const item = this._queue[0];
                item.started = true;
                const outcome = await this._deliver(item);
                if (outcome.again) {
                    item.started = false; // to the new session, after its carry-over (now in front)
                    continue;
                }
                this._queue.splice(this._queue.indexOf(item), 1);
                for (const resolve of item.waiters) resolve(outcome.result);
                if (outcome.gaveUp) this._giveUpWaiting(outcome.result);
            }
        } finally {
            this._pumping = false;
        }
    }

    /**
     * Tries one input until it lands, is refused, or its window ends. Resolves `{result}`, with `gaveUp`
     * when the window ended, or `{again: true}` when it must go to a new session.
     */
    async _deliver(item) {
        const { url, session } = this._deps;
        if (!(await session.whenReady())) return { result: stopped() };
        const sessionId = session.id;
        if (item.sessionId !== sessionId) {
            item.sessionId = sessionId;
            item.key = randomKey(); // keys are per session: a new session has not seen this input
        }
        item.window ??= new RetryWindow(this._deps.retryWindowMs());
        const body = item.value === undefined ? "{}" : JSON.stringify({ value: item.value });
        const path = `/api/sessions/${encodeURIComponent(sessionId)}/` +
            `${encodeURIComponent(item.viewModel)}/${encodeURIComponent(item.input)}`;
        for (let attempt = 1; ; attempt++) {
            let response = null;
            let failure = null;
            try {
                response = await fetch(url(path), {
                    method: "POST",
                    headers: { "Content-Type": "application/json", "Idempotency-Key": item.key },
                    body,
                });
            } catch (error) {
                failure = error;
            }
            if (response?.status === 202) return { result: await this._landed(item, response) };
            if (response?.status === 404) return this._notFound(item, sessionId, await readProblem(response));
            if (response && !isRetryable(response.status)) {
                return { result: this._refused(item, await readProblem(response)) };
            }
            const problem = response ? await readProblem(response) : networkProblem(failure);
            const wait = item.window.next(attempt, response);
            if (wait === null) return { result: this._gaveUp(item, problem), gaveUp: true };
            if (isOutage(response?.status ?? 0)) this._deps.setStalled(true);
            await delay(wait);
            if (session.stopped) return { result: this._stoppedWhileWaiting() };
            if (session.id !== sessionId) return { again: true }; // replaced meanwhile
        }
    }

    async _landed(item, response) {
        this._deps.setStalled(false);
        const reply = await readJSON(response);
        emit(this._deps.sentListeners, { viewModel: item.viewModel, input: item.input, inputSeq: reply?.inputSeq });
        return { ok: true, inputSeq: reply?.inputSeq };
    }

    /** A `404`: the session may be gone (then a new one, and the input again) or the input is unknown. */
    async _notFound(item, sessionId, problem) {
        const { session } = this._deps;
        if (session.id !== sessionId) return { again: true }; // already replaced while this one was out
        if (!item.renewed && (await session.isGone(sessionId))) {
            item.renewed = true;
            if (session.id === sessionId) await session.renew("not-found").catch(() => {}); // a stop: refused next
            return { again: true };
        }
        return { result: this._refused(item, problem) };
    }

    _refused(item, problem) {
        this._deps.setStalled(false);
        emit(this._deps.errorListeners, problem, { viewModel: item.viewModel, input: item.input });
        return { ok: false, problem };
    }

    /**
     * The window ended: this input and every one queued behind it are given up (they followed it; sent
     * without it they would apply out of order). One error says so; the carry-over goes out first when
     * the server answers again, so what the user has entered is not lost.
     */
    _gaveUp(item, lastProblem) {
        this._deps.setStalled(false);
        const seconds = Math.round(item.window.windowMs / 1000);
        const problem = {
            type: "about:blank", title: "No answer", status: lastProblem.status,
            detail: `the server did not answer within ${seconds} s (${lastProblem.detail ?? lastProblem.title})`,
            waitedSeconds: seconds,
        };
        this._carryOverDue = true;
        emit(this._deps.errorListeners, problem, { viewModel: item.viewModel, input: item.input, gaveUp: true });
        return { ok: false, problem };
    }

    _giveUpWaiting(result) {
        const waiting = this._queue.splice(0);
        for (const item of waiting) for (const resolve of item.waiters) resolve(result);
    }

    _stoppedWhileWaiting() {
        this._deps.setStalled(false);
        return stopped();
    }
}

function newItem(viewModel, input, value, resolve) {
    return { viewModel, input, value, started: false, waiters: resolve ? [resolve] : [] };
}

function stopped() {
    return {
        ok: false,
        problem: { type: "about:blank", title: "Client stopped", status: 0,
                   detail: "the input was not sent: the client is stopped (start it again to send)" },
    };
}

function randomKey() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
