// Timeline glue: the editor (timeline.js) wired to the session — live application of edits, the server's
// recorded switches, import/export and render-to-MP4. Mixed into the Studio (studio.js).
import { api, authorized, sleep } from "./api.js";
import { Timeline, promptName } from "./timeline.js";
import { zoomable } from "./timeline-zoom.js";
import { plural } from "./words.js";

const RENDER_POLL_MS = 500;
// A waiting render's place in the studio's queue (1: it renders next), and a finished one's result: its frames
// and the speed it rendered at, named as such (not the video's frame rate).
const ordinal = (n) => n + (n % 100 >= 11 && n % 100 <= 13 ? "th" : ["th", "st", "nd", "rd"][n % 10] || "th");
const waitingLine = (position) =>
  `waiting for its turn: ${position > 1 ? `${ordinal(position)} in line` : "next in line"}`;
const doneLine = (job) => `done: ${plural(job.frames, "frame")}` +
  (job.fps ? ` · render speed ${job.fps.toFixed(1)} frames/s` : "");
const KEPT = "alaya-studio.timeline:";  // + source: localStorage key of the visitor's timeline on that source

export const timelineGlue = {
  buildTimeline() {
    this.timeline = new Timeline(this.$("tl"), {
      presets: this.presets, curves: this.config.easing_curves,
      onChange: (doc) => { this.timelineBuilt = true; this.applySchedule(doc); this.loopButton(); this.keepTimeline(); },
      onSeek: (frame) => this.send({ type: "seek", frame }),
      onSelect: (i, seg) => {
        // the Selected row is refilled only when the selection or its segment changed: a redraw (a pulled
        // schedule, a resize) must not overwrite what the visitor is typing there
        const shown = JSON.stringify([i, seg]);
        if (shown !== this.selectedShown) {
          this.selectedShown = shown;
          this.$("tl-seg-prompt").value = promptName(seg);
          const t = seg.transition || { kind: "cut" };
          this.$("tl-seg-kind").value = t.kind; this.$("tl-seg-frames").value = t.frames || 0;
          this.$("tl-seg-easing").value = t.easing || "linear";
        }
        const doc = this.timeline.doc;
        const span = doc.length ? `${doc.length} frames` : "open-ended";
        this.$("tl-info").textContent = `${plural(doc.segments.length, "block")} · ${span} · ${doc.fps} fps` +
          `${doc.loop ? " · loop" : ""} · selected #${i}, starts at frame ${seg.start}` +
          (this.timeline.noteText ? ` · ${this.timeline.noteText}` : "");
        this.loopButton();
      },
    });
    const easing = this.$("tl-seg-easing");
    for (const e of this.config.easings) easing.add(new Option(e, e));
    this.timeline.render();
  },
  // The visitor's timeline survives a reload (docs/ui.md, "What survives a reload"): every version the page
  // shows is kept in this browser, one per source, and a page opened on that source starts from it once the
  // server has validated it (a stale or damaged copy is dropped).
  keepTimeline() {
    try { localStorage.setItem(KEPT + this.source, JSON.stringify(this.timeline.doc)); } catch { /* full, or off */ }
  },
  async restoreTimeline(source) {
    let kept = null;
    try { kept = JSON.parse(localStorage.getItem(KEPT + source)); } catch { /* damaged: start afresh */ }
    if (!kept) return;
    try {
      this.timeline.set(await api("POST", "/api/ui/schedule/validate", kept), { record: false, notify: false });
      this.timelineBuilt = this.timeline.doc.segments.length > 1;
      this.say(`your timeline is back from before the reload (${plural(this.timeline.doc.segments.length, "block")}), ` +
               "kept in this browser", { ok: true, kind: "timeline" });
    } catch { localStorage.removeItem(KEPT + source); }
  },
  // The timeline shows what the session accepted: after a live switch (recorded into its schedule), and once
  // every schedule sent has been answered (its canonical form, e.g. "Holy Gold" → holy_gold; or, after an
  // error, the schedule the session kept).
  async pullSchedule() {
    if (!this.sessionId) return;
    try {
      const doc = await api("GET", `/api/sessions/${this.sessionId}/schedule`);
      if (!this.pendingSchedules && JSON.stringify(doc) !== JSON.stringify(this.timeline.doc)) {
        this.timeline.set(doc, { record: false, notify: false });
        this.keepTimeline();
      }
    } catch (err) { this.say(err.message, { kind: "timeline" }); }
  },
  scheduleSettled() {
    this.pendingSchedules = Math.max(0, this.pendingSchedules - 1);
    if (!this.pendingSchedules) this.pullSchedule();
  },
  applySchedule(doc) {
    if (!this.$("tl-live").checked) return;
    this.send({ type: "schedule", schedule: doc, ...(this.applyingWhole && { from_now: true }) });
  },
  // A whole schedule the visitor applies (Eight worlds, Load…, Import), not an edit of the one that plays: sent
  // with `from_now`, so one whose length has already passed begins at the frame on screen (docs/ui.md, "Past the
  // end") instead of holding its last block.
  applyWhole(doc) {
    this.applyingWhole = true;
    try { this.timeline.set(doc); } finally { this.applyingWhole = false; }
  },
  // A new source starts from its own schedule: the style on screen, nothing else (the previous source's
  // switches are that source's). The old timeline stays one Undo away.
  freshTimeline() {
    const preset = this.activePreset || this.presets[0].name, fps = this.timeline.doc.fps || 30;
    this.timeline.set({ version: 1, fps, segments: [{ start: 0, prompts: [{ preset }] }] }, { notify: false });
    this.timelineBuilt = false;
  },
  // A take replays with its switches where they were played: its schedule becomes the timeline (editable).
  async takeTimeline(source) {
    try {
      const id = encodeURIComponent(source.slice("take:".length));
      this.timeline.set(await api("GET", `/api/ui/takes/${id}/schedule`), { notify: false });
      this.timelineBuilt = false;
    } catch (err) { this.say(err.message, { kind: "source" }); this.freshTimeline(); }
  },
  // What a live switch did to the timeline, for its info line, as the session says it (`until`: an override on
  // a prepared timeline, docs/ui.md "Live switches on a prepared timeline"); the block named is the one that
  // begins there, read from the timeline as it was before the switch (the session's new one is pulled after).
  switchNote(m) {
    if (m.whole_loop) return `live switch at frame ${m.frame}: the whole loop from the next pass`;
    if (m.until == null || m.request === "switch") return "";
    const doc = this.timeline.doc, looping = doc.loop && doc.length, at = looping ? m.frame % doc.length : m.frame;
    const next = doc.segments.find((s) => s.start === m.until);
    if (m.until <= at) return `live switch at frame ${at}: the next block begins at once, so it did not play; every block kept`;
    const end = next ? `until the next block (${promptName(next)}, frame ${m.until})` : "until this pass ends";
    return `live switch at frame ${at}: ${end}, every block kept` +
      (looping ? "; the next pass plays the timeline as applied" : "");
  },
  loopButton() { this.$("alaya-loop").setAttribute("aria-pressed", String(!!this.timeline.doc.loop)); },

  // An import says what it could not carry over (docs/ui.md, "Imports"): its warnings stay on the message line
  // (kind "import": the applied schedule's ack does not clear them) until the next message replaces them.
  async importText(text) {
    try {
      const { schedule, warnings } = await api("POST", "/api/ui/schedule/import", { text });
      this.applyWhole(schedule);
      if (!warnings.length) this.say("schedule imported", { ok: true, kind: "timeline" });
      else this.say(`schedule imported, ${plural(warnings.length, "warning")}: ${warnings.join(" · ")}`,
                    { warn: true, kind: "import" });
    } catch (err) { this.say(err.message, { kind: "timeline" }); }
  },
  async exportJson() {
    try {
      const doc = await api("POST", "/api/ui/schedule/validate", this.timeline.doc);
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2) + "\n"], { type: "application/json" }));
      a.download = "schedule.json"; a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
      this.succeeded("timeline");
    } catch (err) { this.say(err.message, { kind: "timeline" }); }
  },
  // One render at a time per visitor: the button stays disabled until the job ends, saying its place in the
  // studio's queue while it waits its turn (only this visitor's own), then its progress; then a download button
  // (or the error). The speed it reports is the render's, not the video's frame rate.
  async render() {
    const frames = parseInt(this.$("tl-render-frames").value, 10) || undefined;
    const size = this.hello ? `${this.hello.width}x${this.hello.height}` : this.size;
    const button = this.$("tl-render"), bar = this.$("tl-render-progress"), status = this.$("tl-render-status");
    const link = this.$("tl-render-link");
    // the status beside the button says one thing at a time: the last render's result goes when a new one starts
    link.hidden = true; button.disabled = true; button.textContent = "Rendering…"; status.textContent = "";
    try {
      const request = { schedule: this.timeline.doc, source: this.source, frames, size };
      let job = await api("POST", "/api/ui/renders", request);
      bar.hidden = false;
      while (job.state === "waiting" || job.state === "running") {
        bar.value = job.progress;
        button.textContent = job.state === "waiting" ? "Waiting…" : `Rendering ${job.done}/${job.frames}…`;
        status.textContent = job.state === "waiting" ? waitingLine(job.position) : "";
        await sleep(RENDER_POLL_MS);
        job = await api("GET", `/api/ui/renders/${job.id}`);
      }
      bar.value = job.progress;
      if (job.state !== "done") throw new Error(job.error);
      button.textContent = "Fetching the MP4…";       // rendered: the button no longer says it renders
      status.textContent = doneLine(job);
      // the MP4 answers only to the owner key, which a plain link cannot send: fetch it, offer the blob
      const video = await fetch(job.download, { headers: authorized() });
      if (!video.ok) throw new Error(`${job.download}: HTTP ${video.status}`);
      if (link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
      link.href = URL.createObjectURL(await video.blob()); link.download = `alaya-${job.id}.mp4`;
      link.hidden = false;
      this.succeeded("render");
    } catch (err) { status.textContent = ""; bar.hidden = true; this.say(err.message, { kind: "render" }); }
    finally { button.disabled = false; button.textContent = "Render to MP4"; }
  },

  wireTimeline() {
    const on = (id, ev, fn) => this.$(id).addEventListener(ev, fn), tl = this.timeline;
    on("tl-add", "click", () => {
      const name = this.$("alaya-prompt").value.trim() || this.activePreset || this.presets[0].name;
      tl.add(name, this.transition());
    });
    on("tl-split", "click", () => tl.split());
    on("tl-delete", "click", () => tl.remove());
    on("tl-undo", "click", () => tl.undo());
    on("tl-redo", "click", () => tl.redo());
    on("tl-apply", "click", () => this.send({ type: "schedule", schedule: tl.doc }));
    on("tl-eight", "click", async () => {
      try { this.applyWhole(await api("GET", "/api/ui/schedules/eight_worlds")); }
      catch (err) { this.say(err.message, { kind: "timeline" }); }
    });
    on("tl-save", "click", () => this.exportJson());
    on("tl-load", "change", async (ev) => {
      const f = ev.target.files[0]; ev.target.value = "";
      if (f) this.importText(await f.text());
    });
    on("tl-import", "click", () => this.importText(this.$("tl-import-text").value));
    on("tl-seg-set", "click", () => tl.updateSelected({
      prompt: this.$("tl-seg-prompt").value, kind: this.$("tl-seg-kind").value,
      frames: parseInt(this.$("tl-seg-frames").value, 10), easing: this.$("tl-seg-easing").value }));
    on("tl-render", "click", () => this.render());
    zoomable(tl, { zoomIn: this.$("tl-zoom-in"), zoomOut: this.$("tl-zoom-out"), fit: this.$("tl-zoom-fit"),
                   level: this.$("tl-zoom-level") });
  },
};
