// Live updates: the server's event stream (one message per history event), and forms that
// are disabled, with the reason shown, while no token is kept.

import { token } from "./api.js";
import { h } from "./dom.js";

/**
 * Calls onEvent(kind, event) for each history event (of one run, if run is given), and
 * onOpen() whenever the stream (re)connects, so the page can catch up on what it missed.
 * Returns a function that closes the stream.
 */
export function subscribe(run, onEvent, onOpen = () => {}) {
  const url = run ? `/api/events?run=${encodeURIComponent(run)}` : "/api/events";
  const source = new EventSource(url);
  const status = document.getElementById("status");
  source.onopen = () => {
    status.textContent = "live";
    onOpen();
  };
  source.onerror = () => {
    status.textContent = "event stream lost; reconnecting…";
  };
  source.onmessage = (message) => deliver("message", message);
  // Named events (event: <kind>) do not reach onmessage: listen to every kind there is.
  const seen = new Set();
  const listen = (kind) => {
    if (seen.has(kind)) return;
    seen.add(kind);
    source.addEventListener(kind, (message) => deliver(kind, message));
  };
  function deliver(kind, message) {
    let data = null;
    try {
      data = JSON.parse(message.data);
    } catch {
      data = null;
    }
    onEvent(kind, data);
  }
  for (const kind of EVENT_KINDS) listen(kind);
  return () => source.close();
}

// The history event kinds the engine records (flowtide.engine.events.EventKind).
export const EVENT_KINDS = [
  "run_started", "node_started", "process_started", "node_finished", "node_failed",
  "node_timed_out", "node_retried", "wait_started", "timer_fired", "join_arrived", "join_fired",
  "scatter_item_finished", "subflow_started", "subflow_finished", "terminal_reached",
  "token_cancelled", "warning", "hook_failed", "run_finished", "parked", "signalled",
];

/** Disables the controls of form while no token is kept, saying why. */
export function guardForm(form) {
  const note = h("p", { class: "needs-token muted" },
    "Paste an API token above to use this form (the server refuses changes without one).");
  const heading = form.querySelector("h2");
  if (heading) heading.after(note);
  else form.prepend(note);
  const sync = () => {
    const ok = Boolean(token());
    note.hidden = ok;
    for (const control of form.querySelectorAll("button, input, select, textarea")) {
      // alwaysOn: usable without a token; unavailable: the server does not offer it.
      if (control.dataset.unavailable) control.disabled = true;
      else if (!control.dataset.alwaysOn) control.disabled = !ok;
    }
  };
  document.addEventListener("flowtide-token", sync);
  sync();
  return () => {
    document.removeEventListener("flowtide-token", sync);
    note.remove();
  };
}

/** Calls f at most once per wait ms, the last call always made. */
export function debounce(f, wait = 150) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(f, wait);
  };
}
