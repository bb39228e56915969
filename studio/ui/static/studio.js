// The studio page: plays the session's WebRTC stream and drives it over the data channel
// (docs/datachannel.md). Plain ES modules, no build step, loaded by the Gradio page's <head>; one module per
// concern, each mixed into the Studio below:
//   player.js (connection, data channel, status) · heal.js (reconnecting after a drop)
//   gallery.js (presets, prompt, blend, sources, uploads)
//   drive.js · keyboard.js (Tab, Enter/Space, file pickers, timeline blocks) · layout.js (picture size, gallery)
//   presenter.js (presenter mode, hotkeys, pause, loop) · timeline-glue.js (editor ↔ session)
//   stats.js (charts) · latency.js (glass-to-glass in the page) · switches.js (switch → screen)
//   beat.js (tempo, tap, quantize) · midi.js (Web MIDI, MIDI learn)
//   inspector.js (G-buffer inspector) · share.js (the audience's watch link) · fields.js (number fields' limits);
//   timeline.js, charts.js and qr.js are the widgets.
import { api, typing } from "./api.js";
import { beat } from "./beat.js";
import { drive } from "./drive.js";
import { fields } from "./fields.js";
import { gallery } from "./gallery.js";
import { heal } from "./heal.js";
import { inspector } from "./inspector.js";
import { keyboard } from "./keyboard.js";
import { latency } from "./latency.js";
import { layout } from "./layout.js";
import { midi } from "./midi.js";
import { player } from "./player.js";
import { presenter } from "./presenter.js";
import { share } from "./share.js";
import { stats } from "./stats.js";
import { switches } from "./switches.js";
import { timelineGlue } from "./timeline-glue.js";

const OK_MESSAGE_MS = 5000;

class Studio {
  constructor(root) {
    this.root = root;
    this.$ = (id) => root.querySelector("#" + id);
    this.video = this.$("alaya-video");
    this.pc = null; this.channel = null; this.sessionId = null; this.hello = null;
    this.source = "engine"; this.driving = false; this.held = new Set(); this.paused = false;
    this.lastStatus = null; this.activePreset = null;
  }

  async start() {
    const params = new URLSearchParams(location.search);
    this.size = params.get("size") || undefined;          // e.g. ?size=320x176 (tests, slow machines)
    this.playout = params.get("playout") || "now";         // "browser": leave the jitter buffer to Chromium
    const [presets, sources, config] = await Promise.all(
      [api("GET", "/api/ui/presets"), api("GET", "/api/ui/sources"), api("GET", "/api/ui/config")]);
    this.presets = presets; this.config = config; this.applyLimits();
    this.hotkeyPresets = presets.filter((p) => p.family === presets[0].family).slice(0, 8);
    this.buildGallery(); this.buildLayout(); this.buildBlend(); this.fillSources(sources, params.get("source") || "engine");
    this.buildTimeline(); this.buildCharts(); this.buildLatency(); this.buildSwitches(); this.buildBeat(); this.buildMidi(); this.wire();
    this.inspectLoop();
    await this.restoreTimeline(this.source);
    await this.connect(this.source);
  }

  overlay(prompt, frame = "", fps = "") {
    this.$("alaya-ov-prompt").textContent = prompt; this.$("alaya-ov-frame").textContent = frame;
    this.$("alaya-ov-fps").textContent = this.paused ? "paused" : fps;
    this.$("alaya-ov-prompt").title = prompt;       // long labels are cut on screen; the whole one on hover
  }

  // One message line. Every message has the kind of action it reports (prompt, timeline, render, upload,
  // source, session). A new message replaces the old; good news expires after OK_MESSAGE_MS; an error stays
  // until the next action of its kind succeeds (`succeeded`).
  // ok: good news, which expires; warn: done, with something the visitor should know (it stays, in amber)
  say(text, { ok = false, warn = false, kind = "session" } = {}) {
    const el = this.$("alaya-message");
    clearTimeout(this.messageTimer);
    el.textContent = text; el.classList.toggle("ok", ok); el.classList.toggle("warn", warn); el.dataset.kind = kind;
    if (ok) this.messageTimer = setTimeout(() => { if (el.textContent === text) el.textContent = ""; }, OK_MESSAGE_MS);
    if (this.root.classList.contains("presenter")) this.presenterNote(text);
  }
  succeeded(kind) {
    const el = this.$("alaya-message");
    if (el.dataset.kind === kind && !el.classList.contains("ok")) el.textContent = "";
  }

  wire() {
    const on = (id, ev, fn) => this.$(id).addEventListener(ev, fn);
    on("alaya-prompt-form", "submit", (ev) => {
      ev.preventDefault();
      const text = this.$("alaya-prompt").value.trim();
      if (text && this.send({ type: "prompt", text, transition: this.transition() })) this.showMeaning(text);
    });
    on("alaya-prompt", "input", (ev) => {
      this.boxEdited = !!ev.target.value.trim();        // typed and not sent: the box no longer follows what plays
      if (!this.boxEdited) this.$("alaya-prompt-match").textContent = "";
    });
    let blendTimer = null;
    on("alaya-blend", "input", () => { clearTimeout(blendTimer); blendTimer = setTimeout(() => this.sendBlend(), 120); });
    on("alaya-blend-a", "change", () => this.sendBlend());
    on("alaya-blend-b", "change", () => this.sendBlend());
    on("alaya-source", "change", (ev) => this.connect(ev.target.value));
    on("alaya-upload", "change", (ev) => { const f = ev.target.files[0]; ev.target.value = ""; if (f) this.upload(f); });
    on("alaya-pause", "click", () => this.togglePause());
    on("alaya-loop", "click", () => this.toggleLoop());
    on("alaya-presenter", "click", () => this.presenter());
    on("alaya-record", "click", () => this.toggleTake());
    this.video.addEventListener("click", () => this.drive(true));
    document.addEventListener("pointerdown", (ev) => {   // a click anywhere else releases the kart
      if (this.driving && !this.$("alaya-stage").contains(ev.target)) this.drive(false);
    });
    window.addEventListener("keydown", (ev) => {
      if (this.driving) {
        if (ev.key === "Escape") return this.drive(false);
        if (this.onDriveKey(ev, true)) return;
      }
      if (typing(ev)) return;
      const key = ev.key.toLowerCase(), ctrl = ev.ctrlKey || ev.metaKey;
      if (ctrl && (key === "z" || key === "y")) {
        ev.preventDefault();
        return key === "y" || ev.shiftKey ? this.timeline.redo() : this.timeline.undo();
      }
      if (ev.key === "Delete" && !this.root.classList.contains("presenter")) return this.timeline.remove();
      if (!ev.ctrlKey && !ev.metaKey && !ev.altKey && this.onHotkey(ev)) ev.preventDefault();
    });
    window.addEventListener("keyup", (ev) => { if (this.driving) this.onDriveKey(ev, false); });
    this.wireTimeline(); this.wireShare(); this.wireKeyboard();
  }
}
Object.assign(Studio.prototype, player, heal, gallery, drive, presenter, timelineGlue, stats, latency, switches, beat,
              midi, inspector, share, fields, keyboard, layout);

// Entry point, called by the Gradio HTML component once its markup is in the page.
window.AlayaStudio = {
  start(root) {
    if (window.alayaStudio) return window.alayaStudio;
    const studio = new Studio(root.querySelector("#alaya-studio") || root);
    window.alayaStudio = studio;             // handle for the browser tests and the console
    studio.start().catch((err) => studio.say(`the studio could not start: ${err.message}`, { kind: "source" }));
    return studio;
  },
};
