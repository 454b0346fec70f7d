// A form made from a JSON Schema (the node-settings schema), and the value it holds.
// Each field keeps a reader; read() gives the edited value back as JSON.

import { h } from "./dom.js";

function resolve(schema, root) {
  if (schema && schema.$ref) {
    const path = schema.$ref.replace(/^#\//, "").split("/");
    let target = root;
    for (const part of path) target = target?.[part];
    const { $ref, ...rest } = schema;
    return resolve({ ...target, ...rest }, root);
  }
  return schema || {};
}

/** The schema without its null branch, and whether null is allowed. */
function nonNull(schema, root) {
  const s = resolve(schema, root);
  if (Array.isArray(s.anyOf)) {
    const branches = s.anyOf.map((b) => resolve(b, root));
    const rest = branches.filter((b) => b.type !== "null");
    const nullable = rest.length < branches.length;
    const { anyOf, ...outer } = s;
    if (rest.length === 1) return { schema: { ...rest[0], ...outer }, nullable };
    return { schema: { ...outer, anyOf: rest }, nullable };
  }
  return { schema: s, nullable: s.type === "null" };
}

function kindOf(schema) {
  if (schema.enum) return "enum";
  if (schema.anyOf) {
    // A duration: ISO 8601 text or whole milliseconds; edited as text.
    return "text";
  }
  return schema.type || "text";
}

/** A field for value under schema; returns {el, read()}. name labels it. */
export function field(name, schema, root, value, path) {
  const { schema: s, nullable } = nonNull(schema, root);
  const kind = kindOf(s);
  const id = `f-${path.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const help = s.description ? h("small", { class: "muted" }, s.description) : null;
  // Labelled by the setting's own name, as flow documents and the command line spell it.
  const label = h("label", { for: id }, name);
  if (kind === "object" && s.properties) {
    const present = h("input", { type: "checkbox", id, checked: value != null });
    const inner = objectFields(s, root, value ?? {}, path);
    const box = h("fieldset", { class: "sub" }, h("legend", {}, present, " ", name),
      help, inner.el);
    const sync = () => { inner.el.hidden = !present.checked; };
    present.addEventListener("change", sync);
    sync();
    return { el: box, read: () => (present.checked ? inner.read() : null) };
  }
  if (kind === "array" && resolve(s.items, root).type === "object") {
    const itemSchema = resolve(s.items, root);
    const list = h("div", { class: "items" });
    const readers = [];
    const addItem = (v) => {
      const inner = objectFields(itemSchema, root, v ?? {}, `${path}-${readers.length}`);
      const entry = { read: inner.read, gone: false };
      const row = h("div", { class: "item" }, inner.el,
        h("button", { type: "button", onclick: () => { entry.gone = true; row.remove(); } },
          "Remove"));
      readers.push(entry);
      list.appendChild(row);
    };
    for (const v of value ?? []) addItem(v);
    const add = h("button", { type: "button", onclick: () => addItem({}) },
      `Add ${(itemSchema.title || "item").toLowerCase()}`);
    const box = h("fieldset", { class: "sub" }, h("legend", {}, name), help, list, add);
    return { el: box, read: () => readers.filter((r) => !r.gone).map((r) => r.read()) };
  }
  let input;
  let read;
  if (kind === "enum") {
    const options = (nullable ? [""] : []).concat(s.enum);
    input = h("select", { id }, options.map((o) =>
      h("option", { value: o, selected: o === (value ?? (nullable ? "" : s.default ?? "")) },
        o === "" ? "(default)" : o)));
    read = () => (input.value === "" ? null : input.value);
  } else if (kind === "boolean") {
    input = h("input", { id, type: "checkbox", checked: Boolean(value ?? s.default) });
    read = () => input.checked;
  } else if (kind === "array") {
    input = h("input", { id, type: "text", value: (value ?? []).join(", "),
      placeholder: "comma-separated" });
    read = () => input.value.split(",").map((x) => x.trim()).filter(Boolean);
  } else if (kind === "integer" || kind === "number") {
    input = h("input", { id, type: "number", step: kind === "integer" ? "1" : "any",
      value: value ?? "" });
    read = () => (input.value === "" ? null : Number(input.value));
  } else {
    const example = s.examples?.[0] ?? s.anyOf?.find((b) => b.examples)?.examples?.[0];
    input = h("input", { id, type: "text", value: value ?? "",
      placeholder: example ? `e.g. ${example}` : "" });
    read = () => {
      const text = input.value.trim();
      if (text === "") return null;
      return /^\d+$/.test(text) ? Number(text) : text;
    };
  }
  input.dataset.setting = path;
  return { el: h("div", { class: "field" }, label, input, help), read };
}

/** Fields for each property of an object schema. */
export function objectFields(schema, root, value, path) {
  const s = resolve(schema, root);
  const readers = [];
  const el = h("div", { class: "fields" });
  for (const [key, sub] of Object.entries(s.properties || {})) {
    const f = field(key, sub, root, value?.[key], path ? `${path}.${key}` : key);
    readers.push([key, f.read]);
    el.appendChild(f.el);
  }
  const read = () => {
    const out = {};
    for (const [key, r] of readers) {
      const v = r();
      if (v !== null && v !== undefined) out[key] = v;
    }
    return out;
  };
  return { el, read };
}
