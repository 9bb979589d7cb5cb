// Talking to the app's JSON API with the session cookie and the CSRF token.

export function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export class ApiError extends Error {
  /** `retryAfter`: the answer's Retry-After, in seconds (0 without one). */
  constructor(status, message, body = {}, retryAfter = 0) {
    super(message);
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

/** The API's `detail`: a sentence, or the fields a request got wrong (a 422's list). */
function describe(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((error) => [error.loc?.at(-1), error.msg].filter(Boolean).join(": ")).join("; ");
  }
  return JSON.stringify(detail);
}

async function failure(response) {
  let detail = "";
  let body = {};
  try {
    body = await response.json();
    detail = describe(body.detail);
  } catch {
    detail = response.statusText;
  }
  const retryAfter = Number(response.headers.get("Retry-After")) || 0; // seconds; a date is not sent
  return new ApiError(response.status, detail || `Request failed (${response.status})`, body, retryAfter);
}

/** fetch() a path of the app; non-2xx answers raise ApiError with the server's message. */
export async function request(path, { method = "GET", json, accept = "application/json", signal } = {}) {
  const headers = { Accept: accept };
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
  if (json !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: json === undefined ? undefined : JSON.stringify(json),
    credentials: "same-origin",
    signal,
  });
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJson(path) {
  return (await request(path)).json();
}
