// The HTTP API: JSON in and out, the bearer token from sessionStorage, the server's clock.

const TOKEN_KEY = "flowtide.token";
let clockOffset = 0; // server time minus local time, in ms, from the Date header

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  document.dispatchEvent(new CustomEvent("flowtide-token"));
}

/** Now by the server's clock, in ms since the epoch. */
export function serverNow() {
  return Date.now() + clockOffset;
}

export class ApiError extends Error {
  constructor(status, body) {
    const err = body && body.error ? body.error : null;
    super(err ? err.message : `HTTP ${status}`);
    this.status = status;
    this.code = err ? err.code : "http_error";
    this.body = body;
  }
}

function noteClock(response) {
  const date = response.headers.get("Date");
  if (!date) return;
  const server = Date.parse(date);
  // The Date header has whole seconds: it is at most one second behind the server's clock.
  if (!Number.isNaN(server)) clockOffset = server + 500 - Date.now();
}

/** GET path, the JSON answer. Throws ApiError for an error answer. */
export async function get(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  return answer(response);
}

/** POST body as JSON with the bearer token; returns {status, body} for 2xx and 409. */
export async function post(path, body) {
  const headers = { "Content-Type": "application/json", Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
  noteClock(response);
  const data = await response.json().catch(() => null);
  if (response.ok || response.status === 409) return { status: response.status, body: data };
  throw new ApiError(response.status, data);
}

async function answer(response) {
  noteClock(response);
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}
