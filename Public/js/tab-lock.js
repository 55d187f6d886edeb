// tab-lock.js — a tab's identity for the owner of the event-stream connection: a random id, and a Web
// Lock held for as long as the tab's document lives, so that the owner (which waits for that lock) learns
// when the tab is gone, closed or crashed. Main thread only.

/** A random id for this tab (`crypto.getRandomValues` works on plain HTTP too). */
export function newTabId() {
    const bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The name of the lock a tab holds for its lifetime. */
export function tabLockName(tab) {
    return `bff-tab:${tab}`;
}

/**
 * Holds the tab's lifetime lock until the document goes away. Resolves once it is held (at once
 * without Web Locks: the owner then learns of a closed tab only from its `leave`).
 */
export function holdTabLock(tab) {
    if (!navigator.locks?.request) return Promise.resolve();
    return new Promise((resolve) => {
        navigator.locks.request(tabLockName(tab), () => {
            resolve();
            return new Promise(() => {}); // never released: the browser releases it with the document
        }).catch(() => resolve());
    });
}
