// A run's page: its diagram with the nodes where its tokens are, deadlines counting down by
// the server's clock, each deadline's explanation, the history as a timeline, and forms to
// signal a parked token and to cancel the run. Live from the run's event stream.

import { get, post, serverNow } from "./api.js";
import { badge, enc, fill, h, link, relative, when } from "./dom.js";
import { drawDiagram, placementIri } from "./diagram.js";
import { debounce, guardForm, subscribe } from "./live.js";

const ENDED = new Set(["completed", "failed", "cancelled", "timed_out"]);

export function runPage(runId) {
  const head = h("div", { class: "run-head" });
  const diagram = h("div", { class: "diagram", id: "run-diagram" });
  const deadlines = h("ul", { class: "deadlines", id: "deadlines" });
  const explain = h("div", { class: "explain", id: "explain" });
  const timeline = h("ol", { class: "timeline", id: "timeline" });
  const forms = h("div", { class: "forms" });
  const problem = h("p", { class: "error" });
  // The last answer to a form, kept outside the forms: they are redrawn as the run moves on.
  const answer = h("p", { class: "result", id: "answer", role: "status" });
  let flowDoc = null; // the flow's document, for each node's outputs
  let lastMermaid = "";
  let lastMarks = "";
  let lastOffer = "";
  const unguards = [];

  async function load() {
    let run;
    try {
      run = await get(`/api/runs/${enc(runId)}`);
      problem.textContent = "";
    } catch (error) {
      problem.textContent = `The run could not be read: ${error.message}`;
      return;
    }
    if (!flowDoc) {
      flowDoc = await get(`/api/flows/${enc(run.flow)}`).then((f) => f.document).catch(() => null);
    }
    const events = await get(`/api/runs/${enc(run.run_id)}/history`)
      .then((d) => d.events).catch(() => null);
    showHead(run);
    await showDiagram(run, events ?? []);
    showDeadlines(run);
    showForms(run);
    if (events) showTimeline(events);
    if (ENDED.has(run.lifecycle)) {
      // The server ends a run's stream with the run: nothing more comes, so stop listening.
      close();
      document.getElementById("status").textContent = `The run has ended (${run.lifecycle}).`;
    }
    get(`/api/runs/${enc(run.run_id)}/explain`)
      .then((d) => showExplanations(d.explanations)).catch(() => {});
  }

  function showHead(run) {
    fill(head,
      h("h1", {}, "Run ", h("code", {}, run.run_id)),
      h("p", {}, badge(run.lifecycle), run.outcome ? h("span", { id: "outcome" }, ` outcome ${run.outcome}`) : "",
        " · flow ", link(`/flows/${enc(run.flow)}`, run.flow), ` version ${run.version}`,
        " · created ", when(run.created_at)),
      run.waiting_for?.length
        ? h("p", { class: "warn" }, `Waiting for a worker that runs: ${run.waiting_for.join(", ")}`)
        : "",
      (run.errors ?? []).map((e) => h("p", { class: "error" }, `${e.type}: ${e.message}`)));
    head.dataset.lifecycle = run.lifecycle;
  }

  async function showDiagram(run, events) {
    const marks = new Map();
    for (const e of events) {
      if (e.kind === "terminal_reached" && e.placement) {
        marks.set(placementIri(run.flow, e.placement), "reached");
      }
    }
    for (const t of run.tokens ?? []) {
      const name = t.status === "parked" ? "parked" : t.status === "failed" ? "failed" : "active";
      marks.set(placementIri(run.flow, t.placement), name);
    }
    for (const p of run.parks ?? []) {
      if (!p.run_id) marks.set(placementIri(run.flow, p.placement), "parked");
    }
    const key = JSON.stringify([...marks]);
    if (run.mermaid === lastMermaid && key === lastMarks) return;
    lastMermaid = run.mermaid;
    lastMarks = key;
    await drawDiagram(diagram, run.mermaid, marks);
  }

  function showDeadlines(run) {
    // One line per instant: a parked token's window, its park and its due entry coincide.
    const items = [];
    if (run.deadline) items.push(["run deadline", run.deadline]);
    for (const p of run.parks ?? []) {
      if (p.deadline) items.push([`parked at ${p.placement}${p.key ? ` (key ${p.key})` : ""}`, p.deadline]);
    }
    for (const t of run.tokens ?? []) {
      if (t.deadline) items.push([`${t.placement} (${t.status})`, t.deadline]);
    }
    for (const d of run.due ?? []) items.push([`${d.purpose} due`, d.when]);
    const seen = new Set();
    const shown = items.filter(([, at]) => {
      const instant = Date.parse(at);
      if (seen.has(instant)) return false;
      seen.add(instant);
      return true;
    });
    fill(deadlines, shown.map(([what, at]) => h("li", { dataset: { at } },
      h("span", { class: "what" }, what), " ", h("span", { class: "countdown" }), " ",
      h("span", { class: "muted" }, when(at)))));
    if (!items.length) fill(deadlines, h("li", { class: "muted" }, "No deadline is armed."));
    tick();
  }

  function tick() {
    const now = serverNow();
    for (const li of deadlines.querySelectorAll("li[data-at]")) {
      const left = Date.parse(li.dataset.at) - now;
      const span = li.querySelector(".countdown");
      span.textContent = left > 0 ? relative(left) : `passed ${relative(left)}`;
      li.classList.toggle("passed", left <= 0);
    }
  }

  function showExplanations(list) {
    fill(explain, (list ?? []).map((e) => h("div", { class: "explanation" },
      h("strong", {}, e.placement), ` (${e.status}): `,
      e.deadline
        ? `deadline ${when(e.deadline)} = anchor "${e.anchor}" (${e.anchor_source})` +
          `${e.anchor_at ? ` at ${when(e.anchor_at)}` : ""} + timeout ${duration(e.timeout)}` +
          `${e.timeout_source ? ` (from the ${e.timeout_source})` : ""}`
        : "no timeout",
      e.ending ? `; ended: ${e.ending}` : "",
      (e.timers ?? []).map((t) => h("div", { class: "muted" },
        `timer ${t.index} → ${t.output} after ${duration(t.after)} from ${t.anchor}` +
        (t.fired ? ", fired" : t.due ? `, due ${when(t.due)}` : ""))))));
    if (!list?.length) fill(explain, h("p", { class: "muted" }, "No placement has a window."));
  }

  function showTimeline(events) {
    fill(timeline, events.map((e) => h("li", { class: `ev ev-${e.kind}`, dataset: { kind: e.kind } },
      h("time", {}, when(e.at)), " ", h("strong", {}, e.kind),
      e.placement ? ` at ${e.placement}` : "",
      e.attempt ? ` (attempt ${e.attempt})` : "",
      e.data && Object.keys(e.data).length
        ? h("code", { class: "data" }, JSON.stringify(e.data)) : "")));
  }

  function showForms(run) {
    // Redrawn only when what they offer changes: what the user is typing survives other events.
    const offer = JSON.stringify([ENDED.has(run.lifecycle) && run.lifecycle,
      (run.parks ?? []).map((p) => [p.placement, p.token_id, p.key, p.run_id])]);
    if (offer === lastOffer) return;
    lastOffer = offer;
    while (unguards.length) unguards.pop()();
    if (ENDED.has(run.lifecycle)) {
      fill(forms, h("p", { class: "muted" }, `The run has ended (${run.lifecycle}).`));
      return;
    }
    const parks = (run.parks ?? []).filter((p) => !p.run_id);
    const children = [];
    if (parks.length) children.push(signalForm(run, parks));
    children.push(cancelForm(run));
    fill(forms, children);
  }

  function signalForm(run, parks) {
    const placement = h("select", { id: "signal-placement", name: "placement" },
      parks.map((p, i) => h("option", { value: String(i) },
        p.key ? `${p.placement} (key ${p.key})` : p.placement)));
    const chosen = () => parks[Number(placement.value)] ?? parks[0];
    const output = h("select", { id: "signal-output", name: "output" });
    const payload = h("textarea", { id: "signal-payload", name: "payload", rows: 3 }, "{}");
    const syncOutputs = () => fill(output,
      h("option", { value: "" }, "(the node decides)"),
      outputsOf(flowDoc, chosen().placement).map((o) => h("option", { value: o }, o)));
    placement.addEventListener("change", syncOutputs);
    syncOutputs();
    const form = h("form", { class: "card", id: "signal-form" },
      h("h2", {}, "Signal a parked token"),
      h("label", { for: "signal-placement" }, "Parked at"), placement,
      h("label", { for: "signal-output" }, "Output"), output,
      h("label", { for: "signal-payload" }, "Payload (JSON object)"), payload,
      h("button", { type: "submit" }, "Send signal"));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      let data;
      try {
        data = JSON.parse(payload.value || "{}");
        if (typeof data !== "object" || data === null || Array.isArray(data)) throw new Error("not an object");
      } catch (error) {
        answer.textContent = `The payload is not a JSON object: ${error.message}`;
        answer.className = "result error";
        return;
      }
      // The token too, when the server names it: several tokens may park at one placement.
      const park = chosen();
      const body = { placement: park.placement, payload: data, wait: 10 };
      if (park.token_id) body.token_id = park.token_id;
      if (output.value) body.output = output.value;
      await send(answer, `/api/runs/${enc(run.run_id)}/signals`, body, (a) =>
        a.accepted ? "Signal accepted." : a.pending ? `Recorded (request ${a.request_id}); a worker answers it when it takes the run.`
          : `Refused: ${a.reason}: ${a.message}`);
    });
    unguards.push(guardForm(form));
    return form;
  }

  function cancelForm(run) {
    const reason = h("input", { id: "cancel-reason", name: "reason", type: "text", placeholder: "why (recorded with the request)" });
    const form = h("form", { class: "card", id: "cancel-form" },
      h("h2", {}, "Cancel the run"),
      h("label", { for: "cancel-reason" }, "Reason"), reason,
      h("button", { type: "submit", class: "danger" }, "Cancel run"));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!confirm(`Cancel run ${run.run_id}?`)) return;
      const body = { wait: 10 };
      if (reason.value.trim()) body.reason = reason.value.trim();
      await send(answer, `/api/runs/${enc(run.run_id)}/cancel`, body, (a) =>
        a.pending ? `Recorded (request ${a.request_id}); a worker applies it when it takes the run.`
          : a.cancelled ? "Cancelled." : `Not cancelled: the run is ${a.lifecycle}.`);
    });
    unguards.push(guardForm(form));
    return form;
  }

  const refresh = debounce(load, 100);
  const close = subscribe(runId, refresh, refresh);
  const clock = setInterval(tick, 250);
  load();
  const el = h("section", { class: "run" }, head, problem,
    h("div", { class: "columns" },
      h("div", {}, h("h2", {}, "Where the tokens are"), diagram,
        h("p", { class: "legend muted" }, h("span", { class: "key parked" }, "parked"), " ",
          h("span", { class: "key active" }, "running or due"), " ",
          h("span", { class: "key reached" }, "ended here"))),
      h("div", {}, h("h2", {}, "Deadlines"), deadlines, h("h3", {}, "Why these deadlines"), explain, forms, answer)),
    h("h2", {}, "History"), timeline);
  return { el, leave: () => { close(); clearInterval(clock); while (unguards.length) unguards.pop()(); } };
}

/** The outputs a placement's node can take, from the flow document. */
export function outputsOf(doc, placement) {
  if (!doc) return [];
  const p = (doc.placements ?? []).find((x) => x.id === placement ||
    placement.endsWith(`/node/${x.id}`) || placement.endsWith(`#${x.id}`));
  if (!p) return [];
  const type = (doc.node_types ?? []).find((t) => t.id === p.node);
  const outs = new Set(type?.outputs ?? []);
  for (const o of Object.keys(p.routes ?? {})) if (o !== "timeout" && o !== "error") outs.add(o);
  return [...outs];
}

/** Seconds or ISO text, as text. */
export function duration(value) {
  if (value === null || value === undefined) return "none";
  if (typeof value === "number") return `${value}s`;
  return String(value);
}

async function send(result, path, body, describe) {
  result.className = "result";
  result.textContent = "Sending…";
  try {
    const { body: answer } = await post(path, body);
    result.textContent = describe(answer ?? {});
    result.classList.toggle("error", answer?.accepted === false);
  } catch (error) {
    result.textContent = `${error.status ?? ""} ${error.code ?? ""}: ${error.message}`.trim();
    result.classList.add("error");
  }
}
