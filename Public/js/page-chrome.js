// page-chrome.js — the parts every page shows about the connection itself (not about a view model):
// the reconnecting banner, the "new session" notice and inputs that did not get through. Each message
// goes when it no longer holds: inputs given up are said until the server takes an input again, and
// meanwhile what the page shows is marked as possibly out of date (`data-inputs="given-up"` on the
// root, dimmed by app.css), never left to look current. Main thread only.

const CONNECTION_TEXT = {
    connecting: "",
    open: "",
    paused: "",
    reconnecting: "Reconnecting to the server… What you enter meanwhile is kept and sent when it answers.",
    closed: "Disconnected from the server.",
};

const REPLACED_TEXT = {
    expired: "Your session expired, so a new one was started.",
    deleted: "Your session was closed, so a new one was started.",
    "not-found": "The server no longer knew your session, so a new one was started.",
    "signed-out": "You are signed out.",
};

/** How long a notice that stays true by itself (a session replaced, an input refused) is shown (ms). */
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
    if (inputError) bindInputError(client, inputError);
}

/**
 * The input-error banner: one sentence per failure. A refusal goes after NOTICE_MS; "no answer"
 * stays until the server takes an input again (the carry-over, or the user's next one), however long
 * that takes, and while it shows the page's outputs are marked as out of date. Any error goes once a session is taken into use (it was about
 * the session before).
 */
function bindInputError(client, element) {
    let timer = null;
    let shown = null; // the context of the error on show
    const clear = () => {
        clearTimeout(timer);
        shown = null;
        setBanner(element, "");
        delete document.documentElement.dataset.inputs;
    };
    client.onError((problem, context) => {
        clearTimeout(timer);
        shown = context;
        setBanner(element, errorText(problem, context));
        if (context.gaveUp) {
            document.documentElement.dataset.inputs = "given-up";
        } else {
            delete document.documentElement.dataset.inputs;
            timer = setTimeout(clear, NOTICE_MS);
        }
    });
    client.onSession(clear);
    client.onSent(() => {
        if (shown?.gaveUp) clear();
    });
}

/** What a failure says to the user. */
function errorText(problem, context) {
    if (context.operation === "createSession") {
        return `Could not start a session: ${problem.detail ?? problem.title ?? `status ${problem.status}`}`;
    }
    if (context.gaveUp) {
        return `The server did not answer for ${problem.waitedSeconds} s, so your last action may not ` +
            "have been applied and what you see may be out of date. What you entered is sent again when " +
            "the server answers.";
    }
    return `The server refused that: ${problem.detail ?? problem.title ?? `status ${problem.status}`}`;
}

/** Shows `text` in `element`, hiding the element when the text is empty. */
export function setBanner(element, text) {
    element.textContent = text;
    element.hidden = text === "";
}
