// repo-row.js — builds the list item for one repository from the row template. Every piece of
// repository text is untrusted and goes in through textContent or an attribute, never as HTML.
// Main thread only.

const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });
const full = new Intl.NumberFormat();
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

const UNITS = [
    ["year", 365 * 24 * 3600], ["month", 30 * 24 * 3600], ["week", 7 * 24 * 3600],
    ["day", 24 * 3600], ["hour", 3600], ["minute", 60], ["second", 1],
];

/** A clone of `template`'s row filled with `repo` (the contract's repository object). */
export function buildRepoRow(template, repo) {
    const row = template.content.firstElementChild.cloneNode(true);
    row.dataset.repoId = String(repo.id);

    const avatar = row.querySelector(".avatar");
    avatar.alt = repo.owner ?? "";
    // An avatar that cannot load (offline, refused by img-src) gives way to the owner's initial.
    row.querySelector(".avatar-fallback").textContent = (repo.owner ?? "?").slice(0, 1).toUpperCase();
    avatar.addEventListener("error", () => row.classList.add("no-avatar"), { once: true });
    if (isWebURL(repo.avatarUrl)) avatar.src = repo.avatarUrl;
    else row.classList.add("no-avatar");

    const open = row.querySelector(".repo-open");
    open.textContent = repo.fullName ?? "";
    open.dataset.repoId = String(repo.id);

    setText(row.querySelector(".repo-description"), repo.description);
    setText(row.querySelector(".language"), repo.language);

    const stars = row.querySelector(".stars");
    stars.textContent = `★ ${compact.format(repo.stars ?? 0)} stars`;
    stars.title = `${full.format(repo.stars ?? 0)} stars`;

    const forks = row.querySelector(".forks");
    forks.textContent = `${compact.format(repo.forks ?? 0)} forks`;
    forks.title = `${full.format(repo.forks ?? 0)} forks`;

    const topics = row.querySelector(".topics");
    for (const topic of repo.topics ?? []) {
        const item = document.createElement("li");
        item.className = "topic";
        item.textContent = topic;
        topics.append(item);
    }
    topics.hidden = topics.childElementCount === 0;

    const updated = row.querySelector(".updated");
    const when = new Date(repo.updatedAt);
    updated.dateTime = repo.updatedAt ?? "";
    updated.textContent = formatRelative(when);
    updated.title = Number.isNaN(when.getTime()) ? "" : dateTime.format(when);
    return row;
}

/** True for absolute http(s) URLs: the only kind the page puts into `src`, `href` or `window.open`. */
export function isWebURL(text) {
    try {
        const url = new URL(text);
        return url.protocol === "https:" || url.protocol === "http:";
    } catch {
        return false;
    }
}

/** "3 days ago" style text for a date (empty for an invalid one). */
function formatRelative(date, now = Date.now()) {
    const seconds = (date.getTime() - now) / 1000;
    if (Number.isNaN(seconds)) return "";
    for (const [unit, size] of UNITS) {
        if (Math.abs(seconds) >= size || unit === "second") return relative.format(Math.round(seconds / size), unit);
    }
    return "";
}

function setText(element, text) {
    element.textContent = text ?? "";
    element.hidden = !text;
}
