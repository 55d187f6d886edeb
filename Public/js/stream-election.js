// stream-election.js — where there is no SharedWorker (Chrome on Android): the tabs of this origin elect
// one of them with Web Locks to own the browser's one event-stream connection, and talk to it over a
// BroadcastChannel.
//
// One job: the election and the relay. Every tab asks for the lock `bff-events-owner`; the browser grants
// it to one tab at a time, which runs the hub (stream-hub.js) until it closes or is frozen (`pagehide`,
// `freeze`: it lets go and the next tab in line takes over; a frozen tab also leaves the line, so the
// lock never goes to a tab that cannot run). A new owner says so on the channel and every tab joins it
// again with the last seq it applied, so the new stream resumes each session where its tab is: nothing
// is lost in the hand-over. The owner learns that a tab is gone from `leave` or from its lifetime lock
// (tab-lock.js). Main thread only.
import { backoffDelay } from "./bff-support.js";
import { StreamHub } from "./stream-hub.js";
import { holdTabLock, newTabId, tabLockName } from "./tab-lock.js";

export class ElectedLink {
    /** True where Web Locks and BroadcastChannel exist (Web Locks need a secure context: https, localhost). */
    static isSupported() {
        return typeof BroadcastChannel === "function" && typeof navigator.locks?.request === "function";
    }

    /**
     * @param {string} eventsUrl  absolute URL of `/api/events`
     * @param {string} scope      names the channel and the lock (protocol and URL)
     */
    constructor(eventsUrl, scope) {
        this.tab = newTabId();
        this.kind = "web-locks";
        /** Called with each message the owner sends this tab. */
        this.onMessage = () => {};
        this._eventsUrl = eventsUrl;
        this._lockName = `bff-events-owner ${scope}`;
        this._channel = new BroadcastChannel(scope);
        this._channel.addEventListener("message", (event) => this._received(event.data));
        this._hub = null; // while this tab owns the connection
        this._watching = null; // AbortController of the owner's waits for tabs' lifetime locks
        this._release = null; // lets go of the owner lock
        this._campaign = null; // AbortController of this tab's place in line
        this._ready = holdTabLock(this.tab);
        this._ready.then(() => this._standForOwner());
        addEventListener("pagehide", () => this._stepDown());
        addEventListener("pageshow", (event) => { if (event.persisted) this._standForOwner(); });
        document.addEventListener("freeze", () => this._stepDown()); // Page Lifecycle: on document
        document.addEventListener("resume", () => this._standForOwner());
    }

    /** `owner` while this tab owns the connection, else `follower`. */
    get role() {
        return this._hub ? "owner" : "follower";
    }

    /** A message to the owner: the local hub when this tab owns the connection, else the channel. */
    post(message) {
        const full = { ...message, tab: this.tab, to: "owner" };
        this._ready.then(() => {
            if (this._hub) this._toHub(full);
            else this._channel.postMessage(full);
        });
    }

    _received(message) {
        if (!message || typeof message !== "object") return;
        if (message.to === "owner") {
            if (this._hub) this._toHub(message);
        } else if (message.type === "owner") {
            if (message.tab !== this.tab) this.onMessage({ type: "owner" });
        } else if (message.to === this.tab) {
            this.onMessage(message);
        }
    }

    _toHub(message) {
        const { tab, type } = message;
        if (typeof tab !== "string") return;
        if (type === "join") {
            if (tab !== this.tab) this._watch(tab);
            this._hub.join(tab, message);
        } else if (type === "leave") {
            this._hub.leave(tab);
        }
    }

    /** Joins the line for the owner lock (once; again after stepping down). */
    _standForOwner() {
        if (this._campaign || this._hub) return;
        const campaign = new AbortController();
        this._campaign = campaign;
        navigator.locks.request(this._lockName, { signal: campaign.signal }, () => {
            if (this._campaign !== campaign) return undefined; // stepped down while the grant was on its way
            return new Promise((release) => {
                this._release = release;
                this._becomeOwner();
            });
        }).catch(() => {}).finally(() => {
            if (this._campaign === campaign) this._campaign = null;
        });
    }

    /** This tab holds the lock: it runs the hub, and every tab (this one too) joins it. */
    _becomeOwner() {
        this._watching = new AbortController();
        this._hub = new StreamHub({
            eventsUrl: this._eventsUrl, EventSource,
            backoffDelay: (attempt) => backoffDelay(attempt, 500, 30_000),
            post: (tab, message) => {
                if (tab === this.tab) queueMicrotask(() => this.onMessage(message));
                else this._channel.postMessage({ ...message, to: tab });
            },
        });
        this._channel.postMessage({ type: "owner", tab: this.tab });
        queueMicrotask(() => this.onMessage({ type: "owner" }));
    }

    /** Leaves the owner's place (and the line): the connection closes, the next tab takes over. */
    _stepDown() {
        this._campaign?.abort();
        this._campaign = null;
        if (!this._hub) return;
        this._hub.stop();
        this._hub = null;
        this._watching.abort();
        this._watching = null;
        this._release?.();
        this._release = null;
    }

    /** Waits for a follower's lifetime lock: granted only once that tab is gone, which then leaves. */
    _watch(tab) {
        const watching = this._watching;
        if (!watching || watching.watched?.has(tab)) return;
        (watching.watched ??= new Set()).add(tab);
        navigator.locks.request(tabLockName(tab), { signal: watching.signal }, () => {
            if (this._watching === watching) this._hub?.leave(tab);
        }).catch(() => {});
    }
}
