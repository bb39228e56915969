// G-buffer inspector: once a second, the newest rendered frame's output and channels, with its metadata.
// Mixed into the Studio (studio.js).
import { api, authorized, sleep } from "./api.js";

const INSPECT_MS = 1000;
// meta the line leaves out (the hover shows it): the camera's matrices, the studio's own marks, what the line
// already says, and what changes every frame without meaning much to a visitor
const UNSAID = new Set(["camera", "source", "feed_arrival_s", "position", "speed", "autopilot", "cruise", "engine",
                        "control", "heading", "tick", "seed", "lap_progress"]);

const short = (v) => typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : String(v);

// The source's meta in a line: where the car (or kart) is, how fast, who drives, then its other plain entries;
// any engine's meta reads the same way (the built-in kart, Panda3D, an engine of one's own through the feed).
export function describeMeta(meta) {
  const said = [];
  if (meta.engine) said.push(meta.engine);
  if (Array.isArray(meta.position)) said.push(`at ${meta.position.map((v) => Number(v).toFixed(1)).join(", ")}`);
  if (typeof meta.speed === "number") said.push(`speed ${meta.speed.toFixed(1)} m/s`);
  if ("autopilot" in meta || "cruise" in meta) said.push(meta.autopilot ? "autopilot" : meta.cruise ? "cruising" : "you drive");
  for (const [k, v] of Object.entries(meta)) {
    if (UNSAID.has(k) || v === null || typeof v === "object") continue;
    said.push(`${k.replaceAll("_", " ")} ${short(v)}`);
  }
  return said.join(" · ");
}

export const inspector = {
  async inspectLoop() {
    for (;;) {
      await sleep(INSPECT_MS);
      if (!this.$("alaya-inspect").checked || !this.sessionId || this.root.classList.contains("presenter")) continue;
      try {
        const res = await fetch(`/api/ui/sessions/${this.sessionId}/inspector.png`, { headers: authorized() });
        if (!res.ok) continue;
        const img = this.$("alaya-inspector"), old = img.src;
        img.src = URL.createObjectURL(await res.blob());
        img.dataset.frame = res.headers.get("X-Alaya-Frame"); img.hidden = false;   // hidden until a picture came
        if (old.startsWith("blob:")) URL.revokeObjectURL(old);
        const info = await api("GET", `/api/ui/sessions/${this.sessionId}/inspector`);
        const meta = describeMeta(info.meta), line = this.$("alaya-inspect-info");
        line.textContent = `frame ${info.frame} · ${info.label}${meta ? ` · ${meta}` : ""}`;
        const { camera, ...plain } = info.meta;       // the whole meta on hover, but for the camera's matrices
        line.title = JSON.stringify(plain);
      } catch (err) { /* the session went away; the next connect sets a new id */ }
    }
  },
};
