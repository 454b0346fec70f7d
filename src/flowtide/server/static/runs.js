// The runs page: runs filtered by lifecycle and flow, kept live by the event stream.

import { get } from "./api.js";
import { badge, enc, fill, h, link, when } from "./dom.js";
import { debounce, subscribe } from "./live.js";

// A run's lifecycles (flowtide.engine.lifecycle.Lifecycle); "" is any.
const LIFECYCLES = ["", "pending", "running", "parked", "completed", "failed", "cancelled",
  "timed_out"];

export function runsPage(params) {
  const lifecycle = params.get("lifecycle") || "";
  const flow = params.get("flow") || "";
  const after = params.get("after") || "";
  const body = h("tbody");
  const more = h("p");
  const problem = h("p", { class: "error" });
  const flowSelect = h("select", { id: "filter-flow", name: "flow" },
    h("option", { value: "" }, "every flow"));
  const lifecycleSelect = h("select", { id: "filter-lifecycle", name: "lifecycle" },
    LIFECYCLES.map((l) => h("option", { value: l, selected: l === lifecycle }, l || "any lifecycle")));
  const filters = h("form", { class: "filters" },
    h("label", { for: "filter-lifecycle" }, "Lifecycle"), lifecycleSelect,
    h("label", { for: "filter-flow" }, "Flow"), flowSelect);
  filters.addEventListener("change", () => {
    const q = new URLSearchParams();
    if (lifecycleSelect.value) q.set("lifecycle", lifecycleSelect.value);
    if (flowSelect.value) q.set("flow", flowSelect.value);
    location.hash = `#/runs?${q}`;
  });
  get("/api/flows").then((data) => {
    for (const f of data.flows) {
      flowSelect.appendChild(h("option", { value: f.flow, selected: f.flow === flow }, f.flow));
    }
  }).catch(() => {});

  async function load() {
    const q = new URLSearchParams({ limit: "50" });
    if (lifecycle) q.set("lifecycle", lifecycle);
    if (flow) q.set("flow", flow);
    if (after) q.set("after", after);
    try {
      const data = await get(`/api/runs?${q}`);
      problem.textContent = "";
      fill(body, data.runs.map(row));
      if (!data.runs.length) fill(body, h("tr", {}, h("td", { colspan: 6 }, "No runs.")));
      if (data.next) {
        const nq = new URLSearchParams(q);
        nq.delete("limit");
        nq.set("after", data.next);
        fill(more, h("a", { href: `#/runs?${nq}` }, "Older runs"));
      } else {
        fill(more);
      }
    } catch (error) {
      problem.textContent = `Runs could not be listed: ${error.message}`;
    }
  }
  const refresh = debounce(load, 250);
  const close = subscribe(null, refresh, refresh);
  load();
  const el = h("section", {},
    h("h1", {}, "Runs"), filters, problem,
    h("table", { class: "runs" },
      h("thead", {}, h("tr", {}, ["run", "flow", "lifecycle", "where", "next deadline",
        "created"].map((t) => h("th", {}, t)))),
      body),
    more);
  return { el, leave: close };
}

function row(r) {
  // Each live token: its placement and status ({placement, status, deadline}).
  const where = (r.where ?? []).map((t) => typeof t === "string" ? t : `${t.placement} (${t.status})`)
    .join(", ");
  return h("tr", { dataset: { run: r.run_id } },
    h("td", {}, link(`/runs/${enc(r.run_id)}`, r.run_id)),
    h("td", {}, link(`/flows/${enc(r.flow)}`, r.flow), h("span", { class: "muted" }, ` v${r.version}`)),
    h("td", {}, badge(r.lifecycle), r.outcome ? ` ${r.outcome}` : ""),
    h("td", {}, where),
    h("td", {}, when(r.next_deadline)),
    h("td", {}, when(r.created_at)));
}
