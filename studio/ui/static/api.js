// Small helpers shared by the page's modules: JSON requests to the studio, and "is the visitor typing?".

export async function api(method, url, body) {
  const init = { method, headers: {} };
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const res = await fetch(url, init);
  const data = res.headers.get("content-type")?.includes("json") ? await res.json() : null;
  if (!res.ok) throw new Error((data && data.error) || `${method} ${url}: HTTP ${res.status}`);
  return data;
}

export const typing = (ev) => /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName) && ev.target.type !== "range";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
