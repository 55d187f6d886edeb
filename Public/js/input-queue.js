// input-queue.js — the page's inputs, POSTed one at a time in the order the user made them.
//
// One job: deliver each input exactly once (idempotency key, retries on a network failure or 429,
// a new session when the server no longer knows ours). Replies carry no view state: outputs arrive on
// the stream. Main thread only.
import { delay, emit, networkProblem, readJSON, readProblem, retryAfterMs } from "./bff-support.js";

export class InputQueue {
    /**
     * @param {object} deps
     * @param {(path: string) => string} deps.url
     * @param {import("./session.js").Session} deps.session
     * @param {number} deps.sendAttempts                tries per input on a network failure or 429
     * @param {(attempt: number) => number} deps.backoffDelay
     * @param {Set<Function>} deps.errorListeners       `onError` listeners
     */
    constructor(deps) {
        this._deps = deps;
        this._queue = [];
        this._pumping = false;
    }

    /** Queues an input (see `BffClient.send`); resolves `{ok, inputSeq}` or `{ok: false, problem}`. */
    send(viewModel, input, value, options = {}) {
        return new Promise((resolve) => {
            const last = this._queue[this._queue.length - 1];
            if (options.coalesce && last && !last.started && last.viewModel === viewModel && last.input === input) {
                last.value = value;
                last.waiters.push(resolve);
                return;
            }
            this._queue.push({ viewModel, input, value, started: false, waiters: [resolve] });
            this._pump();
        });
    }

    async _pump() {
        if (this._pumping) return;
        this._pumping = true;
        try {
            while (this._queue.length > 0) {
                const item = this._queue[0];
                item.started = true;
                const result = await this._post(item);
                this._queue.shift();
                for (const resolve of item.waiters) resolve(result);
            }
        } finally {
            this._pumping = false;
        }
    }

    async _post(item, renewed = false) {
        const { url, session, sendAttempts, backoffDelay } = this._deps;
        if (!(await session.whenReady())) return { ok: false, problem: stoppedProblem() };
        const body = item.value === undefined ? "{}" : JSON.stringify({ value: item.value });
        const idempotencyKey = randomKey();
        const path = `/api/sessions/${encodeURIComponent(session.id)}/` +
            `${encodeURIComponent(item.viewModel)}/${encodeURIComponent(item.input)}`;
        for (let attempt = 1; ; attempt++) {
            let response;
            try {
                response = await fetch(url(path), {
                    method: "POST",
                    headers: { "Content-Type": "application/json", "Idempotency-Key": idempotencyKey },
                    body,
                });
            } catch (error) {
                if (attempt < sendAttempts) {
                    await delay(backoffDelay(attempt));
                    continue;
                }
                return this._fail(networkProblem(error), item);
            }
            if (response.status === 202) {
                const reply = await readJSON(response);
                return { ok: true, inputSeq: reply?.inputSeq };
            }
            const problem = await readProblem(response);
            if (response.status === 429 && attempt < sendAttempts) {
                await delay(retryAfterMs(response) ?? backoffDelay(attempt));
                continue;
            }
            if (response.status === 404 && !renewed && (await session.isGone())) {
                await session.renew("not-found").catch(() => {}); // a stop meanwhile: the retry refuses
                return this._post(item, true);
            }
            return this._fail(problem, item);
        }
    }

    _fail(problem, item) {
        emit(this._deps.errorListeners, problem, { viewModel: item.viewModel, input: item.input });
        return { ok: false, problem };
    }
}

function stoppedProblem() {
    return { type: "about:blank", title: "Client stopped", status: 0,
             detail: "the input was not sent: the client is stopped (start it again to send)" };
}

function randomKey() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
