// page-chrome.js — the parts every page shows about the connection itself (not about a view model):
// the reconnecting banner, the "new session" notice and rejected inputs. Main thread only.

const CONNECTION_TEXT = {
    connecting: "",
    open: "",
    paused: "",
    reconnecting: "Connection to the server lost — reconnecting…",
    closed: "Disconnected from the server.",
};

const REPLACED_TEXT = {
    expired: "Your session expired, so a new one was started.",
    deleted: "Your session was closed, so a new one was started.",
    "not-found": "The server no longer knew your session, so a new one was started.",
};

const NOTICE_MS = 20_000;

/**
 * Binds the connection banner, the session notice and the input-error banner of a page to `client`.
 * Each element is optional; pass the ones the page has.
 */
export function bindPageChrome(client, { connectionBanner, sessionNotice, inputError }) {
    if (connectionBanner) {
        client.onConnection((state) => {
            setBanner(connectionBanner, CONNECTION_TEXT[state] ?? "");
            document.documentElement.dataset.connection = state;
        });
    }
    if (sessionNotice) {
        let timer = null;
        client.onSession((session) => {
            clearTimeout(timer);
            setBanner(sessionNotice, REPLACED_TEXT[session.cause] ?? "");
            timer = setTimeout(() => setBanner(sessionNotice, ""), NOTICE_MS);
        });
    }
    if (inputError) {
        let timer = null;
        client.onError((problem, context) => {
            clearTimeout(timer);
            const what = context.operation === "createSession" ? "Could not start a session" : "The server refused that";
            setBanner(inputError, `${what}: ${problem.detail ?? problem.title ?? `status ${problem.status}`}`);
            timer = setTimeout(() => setBanner(inputError, ""), NOTICE_MS);
        });
    }
}

/** Shows `text` in `element`, hiding the element when the text is empty. */
export function setBanner(element, text) {
    element.textContent = text;
    element.hidden = text === "";
}
