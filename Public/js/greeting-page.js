// greeting-page.js — binds greeting.html to the `greeting` view model. Forwards inputs, renders
// outputs; nothing else. Main thread only.
import { BffClient } from "./bff-client.js";
import { bindPageChrome } from "./page-chrome.js";

const client = new BffClient();
const $ = (id) => document.getElementById(id);
const nameField = $("name");
const greetButton = $("greet-button");
const label = $("greeting-label");

bindPageChrome(client, {
    connectionBanner: $("connection-banner"),
    sessionNotice: $("session-notice"),
    inputError: $("input-error"),
});

// Inputs
nameField.addEventListener("input", () => client.send("greeting", "name", nameField.value, { coalesce: true }));
$("greeting-form").addEventListener("submit", (event) => {
    event.preventDefault();
    client.send("greeting", "greet");
});
// Enter in the field always forwards `greet` (the view model ignores it while the name is empty), so
// a fast typist is not stopped by a button state that has not caught up yet.
nameField.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing) return;
    event.preventDefault();
    client.send("greeting", "greet");
});

// The name typed here goes to a session that replaces a lost one (and again after inputs were given up).
client.carryOver(() => [["greeting", "name", nameField.value]]);

// Outputs: the button from `buttonEnabled`, held back while the client reconnects.
const renderButton = () => {
    greetButton.disabled = client.connection === "reconnecting" || !client.get("greeting", "buttonEnabled");
};
client.on("greeting", "buttonEnabled", renderButton);
client.onConnection(renderButton);
client.on("greeting", "label", (text) => { label.textContent = text ?? ""; });

client.start();
window.bffClient = client; // for the browser tests and the console
