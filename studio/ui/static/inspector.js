// G-buffer inspector: once a second, the newest rendered frame's output and channels, with its metadata.
// Mixed into the Studio (studio.js).
import { api, authorized, sleep } from "./api.js";

const INSPECT_MS = 1000;

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
        const kart = info.meta.position ? ` · kart ${info.meta.position.map((v) => v.toFixed(1)).join(", ")}` +
          ` · speed ${info.meta.speed?.toFixed(1)} · ${info.meta.autopilot ? "autopilot" : "you drive"}` : "";
        this.$("alaya-inspect-info").textContent = `frame ${info.frame} · ${info.label}${kart}`;
      } catch (err) { /* the session went away; the next connect sets a new id */ }
    }
  },
};
