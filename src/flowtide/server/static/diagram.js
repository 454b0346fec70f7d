// Flow diagrams: the server's Mermaid source rendered in the page, with the nodes where tokens
// are highlighted by classes appended to the source (the same ids the server's renderer uses).

let initialized = false;
let counter = 0;

function mermaidLib() {
  const lib = globalThis.mermaid;
  if (!lib) throw new Error("the Mermaid bundle did not load");
  if (!initialized) {
    // "strict": labels are sanitized and no script or click handler in a label runs.
    lib.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
    initialized = true;
  }
  return lib;
}

/** The Mermaid id of a placement, as flowtide.render.mermaid.mermaid_id gives it. */
export function mermaidId(text) {
  let out = text.replaceAll(":", "_").replace(/[^A-Za-z0-9_/-]/g, "_").replace(/-{2,}/g, "-");
  if (out.endsWith("-")) out = out.slice(0, -1) + "_";
  const keyword = /^(?:style|linkstyle|interpolate|classdef|class|subgraph|graph|flowchart|end(?!\w))/i;
  if (!out || !/^[A-Za-z]/.test(out) || keyword.test(out)) out = "n_" + out;
  return out;
}

/** A placement's absolute IRI in flow flowId (its id if it is one already). */
export function placementIri(flowId, placement) {
  return /^[A-Za-z][A-Za-z0-9+.-]*:/.test(placement) ? placement : `${flowId}/node/${placement}`;
}

const STYLES = {
  parked: "fill:#fde68a,stroke:#b45309,stroke-width:3px",
  active: "fill:#bfdbfe,stroke:#1d4ed8,stroke-width:3px",
  failed: "fill:#fecaca,stroke:#b91c1c,stroke-width:3px",
  reached: "fill:#bbf7d0,stroke:#15803d,stroke-width:3px",
};

/**
 * Renders source into container. marks maps a placement IRI to "parked", "active",
 * "failed" or "reached" (a terminal the run ended at). Returns the rendered SVG element.
 */
export async function drawDiagram(container, source, marks = new Map()) {
  const lines = [source.trimEnd()];
  const used = new Set(marks.values());
  for (const name of used) lines.push(`  classDef ${name} ${STYLES[name]}`);
  for (const [iri, name] of marks) lines.push(`  class ${mermaidId(iri)} ${name}`);
  const id = `diagram-${++counter}`;
  let svgText;
  try {
    ({ svg: svgText } = await mermaidLib().render(id, lines.join("\n") + "\n"));
  } catch (error) {
    container.replaceChildren(document.createTextNode(`The diagram could not be drawn: ${error}`));
    return null;
  }
  // Mermaid's own output, its labels sanitized (strict): parsed as HTML (its labels are HTML
  // inside foreignObject, not XML) in an inert document, then adopted.
  const doc = new DOMParser().parseFromString(svgText, "text/html");
  const parsed = doc.body.querySelector("svg");
  if (!parsed) {
    container.replaceChildren(document.createTextNode("The diagram could not be drawn."));
    return null;
  }
  const svg = document.adoptNode(parsed);
  svg.classList.add("diagram-svg");
  // Mermaid gives the marked nodes their class; data-mark names it for the page and its tests.
  for (const node of svg.querySelectorAll("g.node")) {
    const name = [...used].find((n) => node.classList.contains(n));
    if (name) node.dataset.mark = name;
  }
  container.replaceChildren(svg);
  return svg;
}
