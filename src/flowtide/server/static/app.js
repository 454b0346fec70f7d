// The dashboard: a page per hash route, each drawn from the API and kept live by the event
// stream. #/runs, #/runs/<run id>, #/flows, #/flows/<flow id>.

import { setToken, token } from "./api.js";
import { fill, h } from "./dom.js";
import { flowPage, flowsPage } from "./flows.js";
import { runPage } from "./run.js";
import { runsPage } from "./runs.js";

const main = document.getElementById("main");
let leave = () => {};

function route() {
  leave();
  leave = () => {};
  const hash = location.hash.replace(/^#/, "") || "/runs";
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query);
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.classList.toggle("current", a.dataset.nav === parts[0]);
  }
  const page =
    parts[0] === "flows" && parts.length > 1 ? flowPage(parts.slice(1).join("/"))
    : parts[0] === "flows" ? flowsPage()
    : parts[0] === "runs" && parts.length > 1 ? runPage(parts.slice(1).join("/"))
    : runsPage(params);
  fill(main, page.el);
  leave = page.leave ?? (() => {});
}

function showToken() {
  const state = document.getElementById("token-state");
  state.textContent = token() ? "token kept for this tab" : "no token: forms are disabled";
  document.body.classList.toggle("has-token", Boolean(token()));
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("token-input");
  setToken(input.value.trim());
  input.value = "";
});
document.getElementById("token-forget").addEventListener("click", () => setToken(""));
document.addEventListener("flowtide-token", showToken);
window.addEventListener("hashchange", route);
window.addEventListener("error", (event) => {
  fill(document.getElementById("status"), h("span", { class: "error" }, String(event.message)));
});
showToken();
route();
