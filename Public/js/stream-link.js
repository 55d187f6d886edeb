// stream-link.js — how a tab reaches the owner of the browser's one event-stream connection: a
// SharedWorker (stream-worker.js), or, where there is none (Chrome on Android), the tab elected with Web
// Locks, over BroadcastChannel (stream-election.js). Where neither exists there is no link, and the tab
// opens its session's own stream (event-stream.js).
//
// One job: pick the link and give it one shape: `tab` (this tab's id), `kind`, `role`, `post(message)`
// to the owner, and `onMessage(message)` for what the owner sends this tab. Main thread only.
import { ElectedLink } from "./stream-election.js";
import { holdTabLock, newTabId } from "./tab-lock.js";

/** Changes when the messages between tabs and the owner change: old workers and tabs do not mix. */
export const PROTOCOL = "bff-events/1";

/**
 * The link for a tab, or null when the browser has neither a SharedWorker nor Web Locks with
 * BroadcastChannel (the tab then uses its session's own stream).
 * @param {string} eventsUrl  absolute URL of `/api/events`
 * @param {object} [options]
 * @param {boolean} [options.worker=true]  false: skip the SharedWorker (it could not run)
 */
export function connectStreamLink(eventsUrl, { worker = true } = {}) {
    const scope = `${PROTOCOL} ${eventsUrl}`;
    if (worker && typeof SharedWorker === "function") {
        try {
            return new WorkerLink(eventsUrl, scope);
        } catch (error) {
            console.error("bff-client: no SharedWorker for the event stream", error);
        }
    }
    if (ElectedLink.isSupported()) return new ElectedLink(eventsUrl, scope);
    return null;
}

/** The link to the SharedWorker that owns the connection for every tab of this origin. */
class WorkerLink {
    constructor(eventsUrl, scope) {
        this.tab = newTabId();
        this.kind = "shared-worker";
        this.role = "worker";
        /** Called with each message the worker sends this tab. */
        this.onMessage = () => {};
        /** Called when the worker cannot run (its script did not load): the tab needs another link. */
        this.onBroken = () => {};
        this._eventsUrl = eventsUrl;
        const worker = new SharedWorker(new URL("./stream-worker.js", import.meta.url),
            { type: "module", name: scope });
        worker.addEventListener("error", (event) => {
            console.error("bff-client: the event-stream worker failed", event.message ?? event);
            this.onBroken();
        });
        this._port = worker.port;
        this._port.addEventListener("message", (event) => this.onMessage(event.data));
        this._port.start();
        // The first message waits for the tab's lifetime lock, so the worker cannot take it first.
        this._ready = holdTabLock(this.tab);
    }

    post(message) {
        const full = { ...message, tab: this.tab, eventsUrl: this._eventsUrl };
        this._ready.then(() => this._port.postMessage(full));
    }
}
