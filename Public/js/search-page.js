// search-page.js — binds index.html to the `search` and `status` view models. It forwards every
// input as a POST and renders what arrives on the stream; what to show is the view models' decision.
// Main thread only.
import { BffClient } from "./bff-client.js";
import { bindPageChrome, setBanner } from "./page-chrome.js";
import { buildRepoRow, isWebURL } from "./repo-row.js";

const client = new BffClient();
const $ = (id) => document.getElementById(id);
const ui = {
    form: $("search-form"), query: $("query"), sort: $("sort"), searchButton: $("search-button"),
    count: $("result-count"), stale: $("stale-badge"), loading: $("loading"),
    error: $("error"), errorMessage: $("error-message"), countdown: $("retry-countdown"),
    results: $("results"), noResults: $("no-results"), loadMore: $("load-more"), opened: $("opened"),
    openedLink: $("opened-link"),
    statusBanner: $("status-banner"), rateLimit: $("rate-limit"), rowTemplate: $("repo-row"),
};
const count = new Intl.NumberFormat();
const clock = new Intl.DateTimeFormat(undefined, { timeStyle: "short" });

bindPageChrome(client, {
    connectionBanner: $("connection-banner"),
    sessionNotice: $("session-notice"),
    inputError: $("input-error"),
});

// MARK: Inputs (forwarded as they happen)

ui.query.addEventListener("input", () => client.send("search", "query", ui.query.value, { coalesce: true }));
ui.sort.addEventListener("change", () => {
    hideOpened();
    client.send("search", "sort", ui.sort.value);
});
ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
});
// Enter always forwards `submit`; the view model ignores it while searching is not enabled. (A disabled
// default button would swallow Enter before a fast typist's query reached the server; while the page
// reconnects, the submit waits in the queue behind the query and lands with it.)
ui.query.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing) return;
    event.preventDefault();
    submit();
});
function submit() {
    hideOpened(); // the "Opened …" line is about the search shown until now
    client.send("search", "submit").then((result) => {
        if (!result.ok && result.problem?.waitedSeconds != null) searchGivenUp = true;
    });
}

// What the user has entered here goes to a session that replaces a lost one (and again after inputs
// were given up): their own input, so Search works on the new session with the text they see. A search
// the user asked for that was given up is asked for again with it: the results that then arrive are
// the ones of the query in the field, not the ones shown before it.
let searchGivenUp = false;
client.carryOver(() => [
    ["search", "query", ui.query.value], ["search", "sort", ui.sort.value],
    ...(searchGivenUp ? [["search", "submit"]] : []),
]);
client.onSent(({ viewModel, input }) => {
    if (viewModel === "search" && input === "submit") searchGivenUp = false;
});
// `coalesce`: a second "more" (button and scroll together) still waiting to be sent is not sent twice.
ui.loadMore.addEventListener("click", () => client.send("search", "loadMore", undefined, { coalesce: true }));
ui.results.addEventListener("click", (event) => {
    const row = event.target.closest(".repo");
    if (!row) return;
    row.classList.add("selected");
    client.send("search", "select", Number(row.dataset.repoId));
});
// Scrolling to the end asks for more, like the button. The observer fires when the button comes into
// view; it is re-armed after each render so a page that does not fill the screen still asks again. It
// asks only while the view model says a load-more can start: the re-arm that follows `loadMoreEnabled`
// turning false (the page is on its way, the rows not yet there) must not ask a second time.
const endObserver = new IntersectionObserver((entries) => {
    if (!entries.some((entry) => entry.isIntersecting)) return;
    if (client.get("search", "loadMoreEnabled") !== true || ui.loadMore.hidden) return;
    client.send("search", "loadMore", undefined, { coalesce: true });
}, { rootMargin: "0px 0px 200px 0px" });

// MARK: Outputs

client.on("search", "query", (query) => {
    // Rendered only while the user is not typing in the field: an echo of an older keystroke must not
    // overwrite newer text (the newer keystroke is already on its way to the server).
    if (document.activeElement !== ui.query && ui.query.value !== query) ui.query.value = query ?? "";
});
client.on("search", "sort", (sort) => { ui.sort.value = sort; });
client.on("search", "searchEnabled", renderButtons);
client.on("search", "isLoading", (loading) => {
    ui.loading.hidden = !loading;
    ui.results.setAttribute("aria-busy", String(Boolean(loading)));
});
// `null` until a search answered: then the count shows nothing (formatting is the page's only part);
// `0` says that nothing matched, with what to change.
client.on("search", "totalCount", (total) => {
    ui.count.textContent = total == null ? "" : total === 0 ? "No repositories match this search." :
        `${count.format(total)} ${total === 1 ? "repository" : "repositories"}`;
    ui.noResults.hidden = total !== 0;
});
client.on("search", "stale", (stale) => { ui.stale.hidden = !stale; });
client.on("search", "hasMore", (hasMore) => {
    ui.loadMore.hidden = !hasMore;
    rearmEndObserver();
});
client.on("search", "loadMoreEnabled", () => {
    renderButtons();
    rearmEndObserver();
});
// While the client reconnects, the buttons that start work wait and the results are dimmed (app.css,
// from the `data-connection` attribute): nothing on screen claims to work that cannot.
client.onConnection(renderButtons);
client.onSession(hideOpened);
client.on("search", "repositories", (repositories) => {
    renderRepositories(repositories ?? []);
    rearmEndObserver();
});
// The search area's sentence (the view model leaves it null for a rate limit: the status banner says it).
client.on("search", "errorMessage", (message) => {
    ui.errorMessage.textContent = message ?? "";
    ui.error.hidden = message == null;
});
client.on("search", "retryAt", renderCountdown);
client.onSignal("search", "openURL", (url) => {
    if (!isWebURL(url)) return;
    window.open(url, "_blank", "noopener");
    // Popup blockers may refuse a tab opened from a stream event: the link is the fallback.
    ui.openedLink.href = url;
    ui.openedLink.textContent = url;
    ui.opened.hidden = false;
});
client.onSignal("search", "deselect", (id) => {
    for (const row of ui.results.querySelectorAll(".repo.selected")) {
        if (row.dataset.repoId === String(id)) row.classList.remove("selected");
    }
});

// Who is signed in: the `account` view model says; signing in and out are navigations and a POST to
// the server's /auth routes, not inputs. After a sign-out the server ends this browser's sessions
// (`signed-out`) and every tab starts an anonymous one.
const account = {
    signIn: $("sign-in"), signedIn: $("signed-in"), avatar: $("account-avatar"), login: $("account-login"),
    signOut: $("sign-out"),
};
function renderAccount() {
    const enabled = client.get("account", "signInEnabled") === true;
    const signedIn = client.get("account", "signedIn") === true;
    account.signIn.hidden = !enabled || signedIn;
    account.signedIn.hidden = !signedIn;
    account.login.textContent = client.get("account", "login") ?? "";
    const avatar = client.get("account", "avatarUrl");
    if (signedIn && isWebURL(avatar)) account.avatar.src = avatar;
    else account.avatar.removeAttribute("src");
}
for (const output of ["signInEnabled", "signedIn", "login", "avatarUrl"]) client.on("account", output, renderAccount);
// This tab's anonymous session is let go before the sign-in: coming back, the tab starts a session of
// the login. Other tabs of this browser hear that someone signed in and do the same.
const accountChannel = "BroadcastChannel" in window ? new BroadcastChannel("bff-account") : null;
account.signIn.addEventListener("click", async (event) => {
    event.preventDefault();
    const target = `/auth/login?returnTo=${encodeURIComponent(location.pathname + location.search)}`;
    await client.deleteSession().catch(() => {});
    location.assign(target);
});
let announced = false;
client.on("account", "signedIn", (signedIn) => {
    if (signedIn === true && !announced) {
        announced = true;
        accountChannel?.postMessage("signed-in");
    }
    if (signedIn === false) announced = false;
});
accountChannel?.addEventListener("message", async (event) => {
    if (event.data !== "signed-in" || client.get("account", "signedIn") === true) return;
    await client.deleteSession().catch(() => {});
    client.start();
});
account.signOut.addEventListener("click", async () => {
    account.signOut.disabled = true;
    try {
        await fetch("/auth/logout", { method: "POST", credentials: "same-origin" });
    } finally {
        account.signOut.disabled = false;
    }
});

client.on("status", "message", (message) => { setBanner(ui.statusBanner, message ?? ""); });
client.on("status", "reachable", (reachable) => { ui.statusBanner.classList.toggle("banner-error", reachable === false); });
client.on("status", "rateLimit", (limit) => {
    ui.rateLimit.textContent = limit == null ? "" :
        `GitHub search quota: ${limit.remaining} of ${limit.limit} left, resets at ${formatResetAt(limit.resetAt)}.`;
});

// MARK: Rendering helpers

/** The view model's `searchEnabled` and `loadMoreEnabled`, held back while the client reconnects. */
function renderButtons() {
    const reconnecting = client.connection === "reconnecting";
    ui.searchButton.disabled = reconnecting || !client.get("search", "searchEnabled");
    ui.loadMore.disabled = reconnecting || !client.get("search", "loadMoreEnabled");
}

function hideOpened() {
    ui.opened.hidden = true;
}

/** Row nodes by key, reused while a repository's data is unchanged, so appending keeps focus and scroll. */
let renderedRows = new Map();

function renderRepositories(repositories) {
    const next = new Map();
    const ordered = [];
    repositories.forEach((repo, index) => {
        const json = JSON.stringify(repo);
        // A repeated id gets its own node (keyed by position), so a duplicate in the data shows on screen.
        const rowKey = next.has(String(repo.id)) ? `${repo.id}@${index}` : String(repo.id);
        const previous = renderedRows.get(rowKey);
        const entry = previous && previous.json === json ? previous : { json, node: buildRepoRow(ui.rowTemplate, repo) };
        next.set(rowKey, entry);
        ordered.push(entry.node);
    });
    let cursor = ui.results.firstElementChild;
    for (const node of ordered) {
        if (node === cursor) cursor = cursor.nextElementSibling;
        else ui.results.insertBefore(node, cursor);
    }
    while (cursor) {
        const stale = cursor;
        cursor = cursor.nextElementSibling;
        stale.remove();
    }
    renderedRows = next;
}

function rearmEndObserver() {
    endObserver.unobserve(ui.loadMore);
    endObserver.observe(ui.loadMore); // a fresh observation reports the current intersection once
}

let countdownTimer = null;

/**
 * Counts down to `retryAt` (the view model's time at which searching is possible again) and shows the
 * seconds left; hidden while it is null. The view model ends the rate limit itself (it sends `null`
 * and enables searching): the page only formats the time left.
 */
function renderCountdown(retryAt) {
    clearInterval(countdownTimer);
    ui.countdown.hidden = retryAt == null;
    if (retryAt == null) return;
    const deadline = Date.parse(retryAt);
    const tick = () => {
        const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
        ui.countdown.textContent = `You can search again in ${left} s.`;
        ui.countdown.dataset.secondsLeft = String(left);
        if (left === 0) clearInterval(countdownTimer);
    };
    tick();
    countdownTimer = setInterval(tick, 250);
}

function formatResetAt(resetAt) {
    const date = typeof resetAt === "number" ? new Date(resetAt * 1000) : new Date(resetAt);
    return Number.isNaN(date.getTime()) ? String(resetAt) : clock.format(date);
}

client.start();
window.bffClient = client; // for the browser tests and the console
