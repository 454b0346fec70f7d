// Building the page's DOM. Every piece of data goes in through textContent or attributes,
// never through innerHTML: run ids, keys and payloads may hold markup.

/** An element: h("div", {class: "x", onclick: f}, child, "text", [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replaces the children of el. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A link to a page of the dashboard. */
export function link(route, text) {
  return h("a", { href: "#" + route }, text);
}

/** A flow or run id in a route: each part path-encoded. */
export function enc(text) {
  return encodeURIComponent(text);
}

/** An instant, shown in the viewer's time zone. */
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** "in 4m 03s" / "3s ago" for a number of milliseconds. */
export function relative(ms) {
  const past = ms < 0;
  let s = Math.floor(Math.abs(ms) / 1000);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const hh = Math.floor(s / 3600);
  s -= hh * 3600;
  const mm = Math.floor(s / 60);
  s -= mm * 60;
  const parts = [];
  if (d) parts.push(`${d}d`);
  if (d || hh) parts.push(`${hh}h`);
  if (d || hh || mm) parts.push(`${mm}m`);
  parts.push(`${String(s).padStart(parts.length ? 2 : 1, "0")}s`);
  const text = parts.join(" ");
  return past ? `${text} ago` : `in ${text}`;
}

/** A badge for a lifecycle or status. */
export function badge(text) {
  return h("span", { class: `badge b-${String(text).replace(/[^a-z_-]/gi, "")}` }, text);
}
