// Presenter mode and the page's hotkeys: full-window video, pause/play, loop. Mixed into the Studio.

import { api } from "./api.js";

const NOTE_MS = 5000;          // a presenter note shows this long, then fades
const KEYS_NOTE = "1–8 styles · space pause/play · L loop · T tap tempo · Esc leave";
const SMALL_STREAM = 0.5;      // a stream under half the screen's width is worth telling the presenter about

export const presenter = {
  presenter(on = !this.root.classList.contains("presenter")) {
    this.root.classList.toggle("presenter", on);
    document.activeElement?.blur();                    // a focused button would take space as a click
    this.$("alaya-presenter").setAttribute("aria-pressed", String(on));
    if (on && this.root.requestFullscreen) this.root.requestFullscreen().catch(() => {});
    if (!on && document.fullscreenElement) document.exitFullscreen().catch(() => {});
    setTimeout(() => this.timeline.render(), 50);
    if (on) this.presenterNote(KEYS_NOTE + this.streamSizeNote());
  },
  // What the presenter should know, on the picture itself (the page's message line is hidden): shown, then faded.
  presenterNote(text) {
    const el = this.$("alaya-presenter-note");
    el.textContent = text; el.classList.add("shown");
    clearTimeout(this.noteTimer);
    this.noteTimer = setTimeout(() => el.classList.remove("shown"), NOTE_MS);
  },
  streamSizeNote() {
    const w = this.hello?.width, h = this.hello?.height;
    if (!w || w >= SMALL_STREAM * window.innerWidth) return "";
    return ` · the stream is ${w}×${h}, shown ${(window.innerWidth / w).toFixed(1)}× larger: start it bigger` +
      " (?size=WxH) for a sharper picture";
  },
  togglePause() { this.send({ type: this.paused ? "play" : "pause" }); },
  // Takes (docs/presenting.md): the session records; the page shows elapsed time and frames while it does.
  toggleTake() { this.send({ type: "take", action: this.recording ? "stop" : "start" }); },
  setRecording(on) {
    this.recording = on;
    const button = this.$("alaya-record");
    button.textContent = on ? "■ Stop take" : "● Record take";
    button.setAttribute("aria-pressed", String(on));
    this.$("alaya-stage").classList.toggle("recording", on);
    if (on) this.$("alaya-take").textContent = "● REC 0.0 s · 0 frames";
  },
  onTakeStatus(take) {
    if (take) this.$("alaya-take").textContent = `● REC ${take.seconds.toFixed(1)} s · ${take.frames} frames`;
  },
  // The take line speaks of the take just recorded on this source: another source (the take itself, the engine
  // again) clears it, while a take is not recording.
  clearTakeLine() { if (!this.recording) this.$("alaya-take").textContent = ""; },
  onTakeStopped(m) {
    this.setRecording(false);
    this.$("alaya-take").textContent = `take ${m.take_id}: ${m.frames} frames`;
    this.say(m.reason ? `${m.reason} (${m.frames} frames kept in ${m.path})` : `take saved: ${m.path}`,
             m.reason ? { kind: "take" } : { ok: true, kind: "take" });
    // the take is now a source: it can be replayed from the picker
    api("GET", "/api/ui/sources").then((s) => this.fillSources(s, this.source)).catch(() => {});
  },
  // Paused: the overlay says so instead of a stale FPS, and a marker shows on the stage (presenter mode too).
  setPaused(p) {
    this.paused = p;
    this.$("alaya-pause").textContent = p ? "Play" : "Pause";
    this.$("alaya-stage").classList.toggle("paused", p);
    if (p) this.$("alaya-ov-fps").textContent = "paused";
  },
  // Looping is for recorded sources and timelines the visitor built: a live engine has no past to replay, so
  // there L loops only a timeline built in the editor, and otherwise says why it does nothing.
  toggleLoop() {
    const doc = structuredClone(this.timeline.doc), on = !doc.loop;
    // blocks from live switches are a timeline too: only a lone block has nothing to loop
    if (on && this.hello?.live && !this.timelineBuilt && doc.segments.length < 2) {
      this.say("the live engine does not loop on its own: build a timeline (Add, Eight worlds, Load…, or switch " +
               "styles) and L loops that", { kind: "timeline" });
      return;
    }
    doc.loop = on;
    if (on && !doc.length) doc.length = this.loopLength(doc);
    this.timeline.set(doc);
    this.send({ type: "loop", on });                   // recorded sources also restart at their end
    this.say(on ? `loop on: ${doc.length} frames repeat` : "loop off", { ok: true, kind: "timeline" });
  },
  // The length L gives a timeline that has none (docs/ui.md, "Presenters"), whatever the window's width: a recording
  // its own frames; a live engine what has played so far (the frame on screen), but at least a second past the
  // last block's start, so that block plays too.
  loopLength(doc) {
    const lastStart = doc.segments[doc.segments.length - 1].start;
    if (this.hello?.recorded) return Math.max(this.hello.frames, lastStart + 1);
    return Math.max(this.lastStatus?.frame || 0, lastStart + Math.round(doc.fps || 30));
  },
  // P and 1–8 (the tiles' numbers) everywhere, except while typing in a field (studio.js) or driving;
  // Esc, space and L in presenter mode.
  onHotkey(ev) {
    const presenting = this.root.classList.contains("presenter");
    const k = ev.key.toLowerCase();
    if (this.driving) return false;
    if (k === "p") return this.presenter(), true;
    if (/^[1-8]$/.test(k)) { const p = this.hotkeyPresets[+k - 1]; if (p) this.setPreset(p.name); return true; }
    if (!presenting) return false;
    if (k === "escape") return this.presenter(false), true;
    if (k === " ") return this.togglePause(), true;
    if (k === "l") return this.toggleLoop(), true;
    if (k === "t") return this.tap(), true;
    return false;
  },
};
