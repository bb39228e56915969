// Small helpers shared by the page's modules: JSON requests to the studio, and "is the visitor typing?".
import { inWords } from "./words.js";

// The visitor's owner key (issue 26): it comes in the offer's answer and goes with every request to the studio
// as Authorization: Bearer KEY, so the visitor's session, uploads and renders answer only to this tab. Kept in
// sessionStorage (a reload stays the same visitor), never in a URL.
const OWNER_KEY = "alaya-owner-key";
let ownerKeyInMemory = null;
export function setOwnerKey(key) {
  ownerKeyInMemory = key;
  try { sessionStorage.setItem(OWNER_KEY, key); } catch { /* storage off: memory only */ }
}
export function ownerKey() {
  try { return ownerKeyInMemory || sessionStorage.getItem(OWNER_KEY); } catch { return ownerKeyInMemory; }
}
export function authorized(headers = {}) {
  const key = ownerKey();
  return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
}

export async function api(method, url, body) {
  const init = { method, headers: authorized() };
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const res = await fetch(url, init);
  const data = res.headers.get("content-type")?.includes("json") ? await res.json() : null;
  // the studio's line, in a visitor's words (the JSON keeps the technical one)
  if (!res.ok) throw new Error((data && data.error && inWords(data.error)) || `${method} ${url}: HTTP ${res.status}`);
  return data;
}

export const typing = (ev) => /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName) && ev.target.type !== "range";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
