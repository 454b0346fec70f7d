// The flows page (every stored flow) and a flow's page: its diagram, each placement's
// effective settings, and the settings editor with what-if and save.

import { get, post } from "./api.js";
import { enc, fill, h, link, when } from "./dom.js";
import { drawDiagram } from "./diagram.js";
import { guardForm } from "./live.js";
import { objectFields } from "./schemaform.js";

export function flowsPage() {
  const body = h("tbody");
  const problem = h("p", { class: "error" });
  const cards = h("div", { class: "flow-cards", id: "flow-cards" });
  get("/api/flows").then((data) => {
    fill(body, data.flows.map((f) => h("tr", {},
      h("td", {}, link(`/flows/${enc(f.flow)}`, f.flow)),
      h("td", {}, f.version), h("td", {}, h("code", {}, String(f.digest).slice(0, 12))),
      h("td", {}, when(f.stored_at)),
      h("td", {}, link(`/runs?flow=${enc(f.flow)}`, String(f.runs ?? 0))))));
    if (!data.flows.length) fill(body, h("tr", {}, h("td", { colspan: 5 }, "No flow is stored yet.")));
    drawEach(cards, data.flows.slice(0, DRAWN));
  }).catch((error) => { problem.textContent = `Flows could not be listed: ${error.message}`; });
  return { el: h("section", {}, h("h1", {}, "Flows"), problem,
    h("table", {}, h("thead", {}, h("tr", {}, ["flow", "latest version", "digest", "stored",
      "runs"].map((t) => h("th", {}, t)))), body), cards) };
}

// How many flows the list draws (each is one more request); a flow's page draws any.
const DRAWN = 12;

/** Each flow's diagram and its placements' settings, one card each, drawn one after another. */
async function drawEach(cards, flows) {
  for (const f of flows) {
    const diagram = h("div", { class: "diagram" });
    const settings = h("ul", { class: "settings-list" });
    cards.appendChild(h("div", { class: "card flow-card", dataset: { flow: f.flow } },
      h("h2", {}, link(`/flows/${enc(f.flow)}`, f.flow), ` v${f.version}`), diagram, settings));
    try {
      const flow = await get(`/api/flows/${enc(f.flow)}`);
      fill(settings, Object.entries(flow.settings ?? {}).map(([pid, s]) =>
        h("li", {}, h("strong", {}, pid), " ", settingsLine(s))));
      await drawDiagram(diagram, flow.mermaid);
    } catch (error) {
      fill(diagram, h("p", { class: "error" }, `Not drawn: ${error.message}`));
    }
  }
}

/** Settings as one line: "timeout PT1H · timeout_anchor node". */
function settingsLine(settings) {
  const parts = Object.entries(settings ?? {}).map(([k, v]) =>
    `${k} ${typeof v === "string" ? v : JSON.stringify(v)}`);
  return parts.length ? parts.join(" · ") : "defaults";
}

// The settings the editor offers, in this order (the schema gives each one's form).
const EDITED = ["timeout", "timeout_anchor", "release_on", "timers", "retry"];

export function flowPage(flowId) {
  const head = h("div");
  const diagram = h("div", { class: "diagram", id: "flow-diagram" });
  const settings = h("div", { id: "placement-settings" });
  const editor = h("div", { id: "editor" });
  const problem = h("p", { class: "error" });
  let unguard = () => {};

  async function load() {
    let flow;
    try {
      flow = await get(`/api/flows/${enc(flowId)}`);
    } catch (error) {
      problem.textContent = `The flow could not be read: ${error.message}`;
      return;
    }
    const latest = flow.versions.find((v) => v.latest) ?? flow.versions[flow.versions.length - 1];
    fill(head, h("h1", {}, "Flow ", h("code", {}, flow.flow)),
      h("p", { id: "flow-version" }, `version ${latest?.version ?? "?"}`, " · ",
        link(`/runs?flow=${enc(flow.flow)}`, "its runs")),
      flow.document?.description ? h("p", { class: "muted" }, flow.document.description) : "",
      h("details", {}, h("summary", {}, `${flow.versions.length} version(s)`),
        h("ul", { id: "versions" }, flow.versions.map((v) => h("li", {},
          `${v.version} · ${String(v.digest).slice(0, 12)} · ${when(v.stored_at)}`,
          v.latest ? " (latest)" : "")))));
    await drawDiagram(diagram, flow.mermaid);
    fill(settings, Object.entries(flow.settings ?? {}).map(([pid, s]) => h("div", { class: "card" },
      h("h3", {}, pid),
      h("pre", { class: "settings-json" }, JSON.stringify(s, null, 2)))));
    if (!Object.keys(flow.settings ?? {}).length) fill(settings, h("p", { class: "muted" }, "No placement takes settings."));
    unguard();
    unguard = showEditor(editor, flow, load);
  }
  load();
  return {
    el: h("section", {}, head, problem,
      h("div", { class: "columns" },
        h("div", {}, h("h2", {}, "Diagram"), diagram),
        h("div", {}, h("h2", {}, "Settings editor"), editor)),
      h("h2", {}, "Each placement's settings"), settings),
    leave: () => unguard(),
  };
}

function showEditor(editor, flow, reload) {
  const placements = Object.keys(flow.settings ?? {});
  if (!placements.length) {
    fill(editor, h("p", { class: "muted" }, "No placement of this flow takes settings."));
    return () => {};
  }
  const schema = flow.settings_schema ?? {};
  const editedSchema = { ...schema, properties: Object.fromEntries(EDITED
    .filter((k) => schema.properties?.[k]).map((k) => [k, schema.properties[k]])) };
  const choose = h("select", { id: "edit-placement", dataset: { alwaysOn: "1" } },
    placements.map((p) => h("option", { value: p }, p)));
  const fieldsBox = h("div", { id: "edit-fields" });
  const last = h("input", { id: "whatif-last", type: "number", min: 1, value: 100 });
  const report = h("div", { id: "whatif-report", class: "report" });
  let fields = null;
  const draw = () => {
    fields = objectFields(editedSchema, schema, flow.settings[choose.value] ?? {}, "");
    fill(fieldsBox, fields.el);
    unguardNow();
    unguardNow = guardForm(form);
  };
  const changes = () => {
    const before = flow.settings[choose.value] ?? {};
    const after = fields.read();
    const set = {};
    for (const key of EDITED) {
      if (!(key in editedSchema.properties)) continue;
      const a = unset(after[key]);
      const b = unset(before[key]);
      const fallback = unset(editedSchema.properties[key].default);
      if (b === null && a !== null && same(a, fallback)) continue; // the default, left alone
      if (!same(a, b)) set[`${choose.value}.${key}`] = a;
    }
    return set;
  };
  const whatif = h("button", { type: "button", id: "whatif-button" }, "What if");
  const save = h("button", { type: "button", id: "save-button" }, "Save as a new version");
  const form = h("form", { class: "card", id: "settings-form" },
    h("label", { for: "edit-placement" }, "Placement"), choose, fieldsBox,
    h("label", { for: "whatif-last" }, "Replay the last N runs"), last,
    h("div", { class: "buttons" }, whatif, save), report);
  let unguardNow = () => {};
  choose.addEventListener("change", draw);
  form.addEventListener("submit", (event) => event.preventDefault());
  const ask = async (saving) => {
    const set = changes();
    if (!Object.keys(set).length) {
      fill(report, h("p", { class: "muted" }, "Nothing is changed yet."));
      return;
    }
    fill(report, h("p", { class: "muted" }, saving ? "Saving…" : "Replaying the recorded runs…"));
    const body = { flow: flow.flow, set, last: Number(last.value) || 100 };
    if (saving) body.save = true;
    try {
      const { status, body: answer } = await post("/api/whatif", body);
      showReport(report, answer, status);
      if (saving && status < 300) await reload();
    } catch (error) {
      fill(report, h("p", { class: "error" }, `${error.status ?? ""} ${error.code ?? ""}: ${error.message}`.trim()),
        (error.body?.problems ?? []).map((p) => h("p", { class: "error" }, `${p.pointer ?? p.placement ?? ""}: ${p.message}`)));
    }
  };
  whatif.addEventListener("click", () => ask(false));
  save.addEventListener("click", () => ask(true));
  fill(editor, form);
  draw();
  offered().then(({ whatif: canAsk, save: canSave }) => {
    const missing = [];
    if (!canAsk) missing.push([whatif, "what-if (POST /api/whatif)"]);
    if (!canSave) missing.push([save, "saving an edited version (POST /api/whatif with \"save\")"]);
    for (const [button, what] of missing) {
      button.dataset.unavailable = "1";
      button.disabled = true;
      form.appendChild(h("p", { class: "muted unavailable" }, `This server does not offer ${what}.`));
    }
  });
  return () => unguardNow();
}

/** Whether the server offers what-if, and saving through it, by its OpenAPI document. */
async function offered() {
  try {
    const api = await get("/openapi.json");
    const op = api.paths?.["/api/whatif"]?.post;
    if (!op) return { whatif: false, save: false };
    let body = op.requestBody?.content?.["application/json"]?.schema ?? {};
    if (body.$ref) body = api.components?.schemas?.[body.$ref.split("/").pop()] ?? {};
    return { whatif: true, save: Boolean(body.properties?.save) };
  } catch {
    return { whatif: true, save: true }; // no document to tell: let the server answer
  }
}

/** null for a setting left unset (nothing, or an empty list). */
function unset(value) {
  return value === undefined || value === null || (Array.isArray(value) && !value.length)
    ? null : value;
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The what-if report: its summary lines first, then what else it says. */
function showReport(box, report, status) {
  const lines = [].concat(report?.summary ?? report?.lines ?? []);
  const saved = report?.saved ?? report?.registered ?? null;
  fill(box,
    status === 409 ? h("p", { class: "error" }, report?.message ?? "Refused.") : "",
    h("ul", { class: "summary" }, lines.map((l) => h("li", {}, typeof l === "string" ? l : JSON.stringify(l)))),
    saved ? h("p", { class: "saved", id: "saved-version" },
      `Saved: version ${saved.version ?? JSON.stringify(saved)}${saved.new === false ? " (already stored)" : ""}`) : "",
    h("details", {}, h("summary", {}, "The whole report"),
      h("pre", {}, JSON.stringify(report, null, 2))));
}
