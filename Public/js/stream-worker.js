// stream-worker.js — the SharedWorker that owns the browser's one event-stream connection for every
// tab of this origin (started by stream-link.js as a module worker; same-origin, so `script-src 'self'`
// allows it).
//
// One job: carry messages between the tabs' MessagePorts and the hub (stream-hub.js). A tab is gone
// when it says so (`leave`, sent on `pagehide`), when its port closes, or, where Web Locks exist, when
// the lock it holds for its lifetime (`bff-tab:ID`) is released: the worker waits for that lock, and
// gets it only when the tab's document is gone, so a crashed tab leaves too. Worker thread only.
import { backoffDelay } from "./bff-support.js";
import { StreamHub } from "./stream-hub.js";
import { tabLockName } from "./tab-lock.js";

const ports = new Map(); // tab -> MessagePort
const watched = new Set(); // tabs whose lifetime lock is waited for
let hub = null;

function hubFor(eventsUrl) {
    hub ??= new StreamHub({
        eventsUrl, EventSource,
        backoffDelay: (attempt) => backoffDelay(attempt, 500, 30_000),
        post: (tab, message) => ports.get(tab)?.postMessage(message),
    });
    return hub;
}

function receive(port, message) {
    const tab = message?.tab;
    if (typeof tab !== "string") return;
    if (message.type === "join" && typeof message.eventsUrl === "string") {
        ports.set(tab, port);
        watchTab(tab);
        hubFor(message.eventsUrl).join(tab, message);
    } else if (message.type === "leave") {
        hub?.leave(tab);
    }
}

/** Waits for the tab's lifetime lock: granted only once the tab is gone. */
function watchTab(tab) {
    if (watched.has(tab) || !self.navigator.locks?.request) return;
    watched.add(tab);
    self.navigator.locks.request(tabLockName(tab), () => {
        watched.delete(tab);
        gone(tab);
    }).catch(() => watched.delete(tab));
}

function gone(tab) {
    hub?.leave(tab);
    ports.delete(tab);
}

self.addEventListener("connect", (event) => {
    const port = event.ports[0];
    port.addEventListener("message", (e) => receive(port, e.data));
    // Where the browser reports a closed port (the tab's document went away), its tabs leave.
    port.addEventListener("close", () => {
        for (const [tab, p] of ports) if (p === port) gone(tab);
    });
    port.start();
});
