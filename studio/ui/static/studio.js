// The studio page: plays the session's WebRTC stream and drives it over the data channel
// (docs/datachannel.md), plus the gallery, drive mode, presenter mode, stats charts, inspector and the
// timeline editor (timeline.js). No build step; loaded by the Gradio page's <head>.
(function () {
  "use strict";
  const DRIVE_KEYS = { arrowleft: "left", a: "left", arrowright: "right", d: "right", arrowup: "up", w: "up",
                       arrowdown: "down", s: "down", " ": "space", r: "reset" };
  const ICE_GATHER_MS = 3000;
  const RECONNECT_MS = 2000;  // a dropped session (network, studio restart, watchdog) comes back by itself
  const INSPECT_MS = 1000, STATS_MS = 2000;

  async function api(method, url, body) {
    const init = { method, headers: {} };
    if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    const res = await fetch(url, init);
    const data = res.headers.get("content-type")?.includes("json") ? await res.json() : null;
    if (!res.ok) throw new Error((data && data.error) || `${method} ${url}: HTTP ${res.status}`);
    return data;
  }
  const typing = (ev) => /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName) && ev.target.type !== "range";

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
      const [presets, sources, config] = await Promise.all(
        [api("GET", "/api/ui/presets"), api("GET", "/api/ui/sources"), api("GET", "/api/ui/config")]);
      this.presets = presets; this.config = config;
      this.hotkeyPresets = presets.filter((p) => p.family === presets[0].family).slice(0, 8);
      this.buildGallery(); this.buildBlend(); this.fillSources(sources, params.get("source") || "engine");
      this.buildTimeline(); this.buildCharts(); this.wire();
      setInterval(() => this.charts.forEach((c) => c.draw()), 250);
      setInterval(() => this.send({ type: "stats" }), STATS_MS);
      this.inspectLoop();
      await this.connect(this.source);
    }

    // ---- connection ---------------------------------------------------------------------------------------
    async connect(source) {
      this.disconnect();
      this.source = source; this.$("alaya-source").value = source; this.timeline.extent = 0;
      const { iceConfiguration, watchIce } = await import("/webrtc/ice.js");  // ICE servers: the studio's
      const ice = await iceConfiguration();
      const pc = new RTCPeerConnection(ice); this.pc = pc;
      const iceWatch = watchIce(pc, ice, (msg) => { if (pc === this.pc) this.say(msg); });
      pc.addTransceiver("video", { direction: "recvonly" });
      const channel = pc.createDataChannel("control"); this.channel = channel;
      channel.onmessage = (ev) => this.onMessage(JSON.parse(ev.data));
      // The studio closes the channel when it ends the session; unless the sequence simply ended, start a new
      // session on the same source with the same timeline, so a presenter's screen never stays dead.
      channel.onclose = () => { if (pc === this.pc && !this.sourceEnded) this.reconnectSoon(); };
      pc.addEventListener("connectionstatechange", () => {
        if (pc === this.pc && pc.connectionState === "failed") this.reconnectSoon();
      });
      pc.ontrack = (ev) => {
        this.video.srcObject = ev.streams[0] || new MediaStream([ev.track]);
        this.video.play().catch(() => {});
      };
      await pc.setLocalDescription(await pc.createOffer());
      await new Promise((done) => {
        if (pc.iceGatheringState === "complete") return done();
        const t = setTimeout(done, ICE_GATHER_MS);
        pc.addEventListener("icegatheringstatechange", () => {
          if (pc.iceGatheringState === "complete") { clearTimeout(t); done(); }
        });
      });
      const iceProblem = iceWatch.problem();
      if (iceProblem) { this.say(iceProblem); this.overlay("ICE failed"); return; }
      this.overlay("connecting…");
      try {
        const answer = await api("POST", "/api/webrtc/offer", { sdp: pc.localDescription.sdp, type: "offer", source,
          schedule: this.timeline.doc, size: this.size });
        if (pc !== this.pc) return;
        this.sessionId = answer.session_id;
        await pc.setRemoteDescription({ sdp: answer.sdp, type: answer.type });
        this.say("");
      } catch (err) {
        this.say(err.message); this.overlay("not connected");
        if (pc === this.pc) this.disconnect();
      }
    }
    disconnect() {
      if (this.pc) this.pc.close();
      this.pc = null; this.channel = null; this.sessionId = null; this.hello = null; this.sourceEnded = false;
    }
    reconnectSoon() {
      if (this.reconnectTimer) return;
      this.overlay("reconnecting…");
      this.reconnectTimer = setTimeout(() => { this.reconnectTimer = null; this.connect(this.source); }, RECONNECT_MS);
    }
    send(msg) {
      if (this.channel && this.channel.readyState === "open") { this.channel.send(JSON.stringify(msg)); return true; }
      return false;
    }

    onMessage(m) {
      switch (m.type) {
        case "hello": this.hello = m; break;
        case "status": this.onStatus(m); break;
        case "ack":
          if (["prompt", "preset", "blend", "switch"].includes(m.request)) this.pullSchedule();
          if (m.request === "pause" || m.request === "play") this.setPaused(m.request === "pause");
          break;
        case "stats":
          this.statsLine = `${m.codec || "?"} · ${m.bitrate ? (m.bitrate / 1e6).toFixed(2) + " Mbit/s" : ""} · first frame ` +
            `${m.time_to_first_frame_ms ?? "–"} ms · ${m.frames_sent} frames sent · ${m.errors} errors`;
          break;
        case "error": this.say(m.message); break;
        case "ended":
          this.sourceEnded = m.reason === "the source ended";
          this.say(`stream ended at frame ${m.frame}: ${m.reason}`, true);
          break;
      }
    }

    onStatus(m) {
      this.lastStatus = m;
      const doc = this.timeline.doc;
      this.overlay(m.label, `frame ${m.frame}`, `${m.fps.toFixed(1)} fps`);
      this.$("alaya-status").textContent =
        `session ${this.sessionId} · ${this.source} · frame ${m.frame} · ${m.fps.toFixed(1)}/${m.target_fps} fps` +
        ` · latency ${m.latency_ms} ms${m.slow ? " · renderer slower than real time" : ""}\n${this.statsLine || ""}`;
      this.timeline.setPlayhead(doc.loop && doc.length ? m.frame % doc.length : m.frame);
      const top = [...m.prompts].sort((a, b) => b.weight - a.weight)[0];
      this.markActive(top && top.preset);
      this.charts[0].push({ fps: m.fps });
      this.charts[1].push({ latency: m.latency_ms });
      const per = m.chunk_size || 1, stages = {};
      for (const [k, v] of Object.entries(m.stages_ms || {})) stages[k] = v / per;
      this.charts[2].push(stages);
    }

    async pullSchedule() {          // a live switch was recorded into the session's schedule: show it
      if (!this.sessionId) return;
      try { this.timeline.set(await api("GET", `/api/sessions/${this.sessionId}/schedule`), { notify: false }); }
      catch (err) { this.say(err.message); }
    }
    applySchedule(doc) {
      if (this.$("tl-live").checked) this.send({ type: "schedule", schedule: doc });
    }

    // ---- visitors: gallery, prompt, blend, sources, uploads -------------------------------------------------
    buildGallery() {
      const box = this.$("alaya-gallery");
      for (const p of this.presets) {
        const tile = document.createElement("button");
        tile.type = "button"; tile.className = "alaya-tile"; tile.dataset.preset = p.name; tile.title = p.title;
        tile.style.background = p.color;
        const key = this.hotkeyPresets.indexOf(p);
        tile.innerHTML = `<img loading="lazy" alt=""><span></span>${key >= 0 ? `<kbd>${key + 1}</kbd>` : ""}`;
        tile.querySelector("img").src = p.thumbnail;
        tile.querySelector("span").textContent = p.title;
        tile.onclick = () => this.setPreset(p.name);
        box.appendChild(tile);
      }
    }
    setPreset(name) {
      this.send({ type: "preset", name, transition: this.transition() });
      this.markActive(name);
    }
    markActive(name) {
      if (name === this.activePreset) return;
      this.activePreset = name;
      for (const t of this.root.querySelectorAll(".alaya-tile")) t.classList.toggle("active", t.dataset.preset === name);
    }
    transition() { return Math.max(0, parseInt(this.$("alaya-transition").value, 10) || 0); }

    buildBlend() {
      for (const [id, k] of [["alaya-blend-a", 0], ["alaya-blend-b", 1]]) {
        const sel = this.$(id);
        for (const p of this.presets) sel.add(new Option(p.title, p.name));
        sel.selectedIndex = k;
      }
    }
    sendBlend() {
      const t = this.$("alaya-blend").value / 100;
      const prompts = [{ preset: this.$("alaya-blend-a").value, weight: 1 - t },
                       { preset: this.$("alaya-blend-b").value, weight: t }].filter((p) => p.weight > 0);
      this.send({ type: "blend", prompts, mode: "linear", transition: 0 });
    }

    fillSources(sources, wanted) {
      const sel = this.$("alaya-source");
      sel.innerHTML = "";
      for (const s of sources) sel.add(new Option(s.title, s.id));
      if (![...sel.options].some((o) => o.value === wanted)) sel.add(new Option(wanted, wanted));
      this.source = wanted;
    }
    async upload(file) {
      this.say(`uploading ${file.name}…`, true);
      try {
        const res = await fetch(`/api/ui/uploads/${encodeURIComponent(file.name)}`, { method: "PUT", body: file });
        const data = await res.json().catch(() => ({}));
        if (!res.ok) throw new Error(data.error || `upload failed: HTTP ${res.status}`);
        this.fillSources(await api("GET", "/api/ui/sources"), data.source);
        await this.connect(data.source);
        if (this.sessionId) this.say(`uploaded ${data.source}: ${data.frames} frames, ${data.width}x${data.height}`, true);
      } catch (err) { this.say(err.message); }
    }

    // ---- drive ----------------------------------------------------------------------------------------------
    drive(on) {
      if (on === this.driving) return;
      this.driving = on;
      this.$("alaya-stage").classList.toggle("driving", on);
      if (on) { this.video.focus(); return; }
      for (const key of this.held) this.send({ type: "key", key, down: false });
      this.held.clear();
      this.send({ type: "autopilot", on: true });       // released: the autopilot takes the wheel again
    }
    onDriveKey(ev, down) {
      const key = DRIVE_KEYS[ev.key.toLowerCase()];
      if (!key) return false;
      ev.preventDefault();
      if (down === this.held.has(key)) return true;      // auto-repeat
      down ? this.held.add(key) : this.held.delete(key);
      this.send({ type: "key", key, down });
      return true;
    }

    // ---- presenters ---------------------------------------------------------------------------------------
    presenter(on = !this.root.classList.contains("presenter")) {
      this.root.classList.toggle("presenter", on);
      document.activeElement?.blur();                    // a focused button would take space as a click
      this.$("alaya-presenter").setAttribute("aria-pressed", String(on));
      if (on && this.root.requestFullscreen) this.root.requestFullscreen().catch(() => {});
      if (!on && document.fullscreenElement) document.exitFullscreen().catch(() => {});
      setTimeout(() => this.timeline.render(), 50);
    }
    togglePause() { this.send({ type: this.paused ? "play" : "pause" }); }
    setPaused(p) { this.paused = p; this.$("alaya-pause").textContent = p ? "Play" : "Pause"; }
    toggleLoop() {
      const doc = structuredClone(this.timeline.doc), on = !doc.loop;
      doc.loop = on;
      if (on && !doc.length) doc.length = this.timeline.viewFrames;
      this.timeline.set(doc);
      this.send({ type: "loop", on });                   // recorded sources also restart at their end
    }
    onHotkey(ev) {
      const presenting = this.root.classList.contains("presenter");
      const k = ev.key.toLowerCase();
      if (k === "p") return this.presenter(), true;
      if (!presenting) return false;
      if (k === "escape") return this.presenter(false), true;
      if (/^[1-8]$/.test(k)) { const p = this.hotkeyPresets[+k - 1]; if (p) this.setPreset(p.name); return true; }
      if (k === " ") return this.togglePause(), true;
      if (k === "l") return this.toggleLoop(), true;
      return false;
    }

    // ---- timeline -----------------------------------------------------------------------------------------
    buildTimeline() {
      this.timeline = new AlayaTimeline.Timeline(this.$("tl"), {
        presets: this.presets,
        onChange: (doc) => { this.applySchedule(doc); this.loopButton(); },
        onSeek: (frame) => this.send({ type: "seek", frame }),
        onSelect: (i, seg) => {
          this.$("tl-seg-prompt").value = AlayaTimeline.promptName(seg);
          const t = seg.transition || { kind: "cut" };
          this.$("tl-seg-kind").value = t.kind; this.$("tl-seg-frames").value = t.frames || 0;
          this.$("tl-seg-easing").value = t.easing || "linear";
          const doc = this.timeline.doc;
          const span = doc.length ? `${doc.length} frames` : "open-ended";
          this.$("tl-info").textContent = `${doc.segments.length} segments · ${span} · ${doc.fps} fps` +
            `${doc.loop ? " · loop" : ""} · selected #${i} at frame ${seg.start}`;
          this.loopButton();
        },
      });
      const easing = this.$("tl-seg-easing");
      for (const e of this.config.easings) easing.add(new Option(e, e));
      this.timeline.render();
    }
    loopButton() { this.$("alaya-loop").setAttribute("aria-pressed", String(!!this.timeline.doc.loop)); }
    async importText(text) {
      try { this.timeline.set(await api("POST", "/api/ui/schedule/import", { text })); this.say("schedule imported", true); }
      catch (err) { this.say(err.message); }
    }
    async exportJson() {
      try {
        const doc = await api("POST", "/api/ui/schedule/validate", this.timeline.doc);
        const a = document.createElement("a");
        a.href = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2) + "\n"], { type: "application/json" }));
        a.download = "schedule.json"; a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 1000);
      } catch (err) { this.say(err.message); }
    }
    async render() {
      const frames = parseInt(this.$("tl-render-frames").value, 10) || undefined;
      const size = this.hello ? `${this.hello.width}x${this.hello.height}` : this.size;
      const bar = this.$("tl-render-progress"), status = this.$("tl-render-status"), link = this.$("tl-render-link");
      link.hidden = true;
      try {
        let job = await api("POST", "/api/ui/renders", { schedule: this.timeline.doc, source: this.source, frames, size });
        bar.hidden = false;
        while (job.state === "running") {
          bar.value = job.progress; status.textContent = `rendering ${job.done}/${job.frames}`;
          await new Promise((r) => setTimeout(r, 500));
          job = await api("GET", `/api/ui/renders/${job.id}`);
        }
        bar.value = job.progress;
        if (job.state !== "done") throw new Error(job.error);
        status.textContent = `done: ${job.frames} frames at ${job.fps?.toFixed(1)} fps`;
        link.href = job.download; link.hidden = false;
      } catch (err) { status.textContent = ""; this.say(err.message); }
    }

    // ---- insight --------------------------------------------------------------------------------------------
    buildCharts() {
      const { LineChart } = AlayaCharts;
      this.charts = [
        new LineChart(this.$("alaya-chart-fps"), { title: "FPS", guide: 30 }),
        new LineChart(this.$("alaya-chart-latency"), { title: "latency", unit: " ms" }),
        new LineChart(this.$("alaya-chart-stages"), { title: "ms/frame", unit: "" }),
      ];
    }
    async inspectLoop() {
      for (;;) {
        await new Promise((r) => setTimeout(r, INSPECT_MS));
        if (!this.$("alaya-inspect").checked || !this.sessionId || this.root.classList.contains("presenter")) continue;
        try {
          const res = await fetch(`/api/ui/sessions/${this.sessionId}/inspector.png`);
          if (!res.ok) continue;
          const img = this.$("alaya-inspector"), old = img.src;
          img.src = URL.createObjectURL(await res.blob());
          img.dataset.frame = res.headers.get("X-Alaya-Frame");
          if (old.startsWith("blob:")) URL.revokeObjectURL(old);
          const info = await api("GET", `/api/ui/sessions/${this.sessionId}/inspector`);
          const kart = info.meta.position ? ` · kart ${info.meta.position.map((v) => v.toFixed(1)).join(", ")}` +
            ` · speed ${info.meta.speed?.toFixed(1)} · ${info.meta.autopilot ? "autopilot" : "you drive"}` : "";
          this.$("alaya-inspect-info").textContent = `frame ${info.frame} · ${info.label}${kart}`;
        } catch (err) { /* the session went away; the next connect sets a new id */ }
      }
    }

    // ---- wiring ---------------------------------------------------------------------------------------------
    overlay(prompt, frame = "", fps = "") {
      this.$("alaya-ov-prompt").textContent = prompt; this.$("alaya-ov-frame").textContent = frame;
      this.$("alaya-ov-fps").textContent = fps;
    }
    say(text, ok = false) {
      const el = this.$("alaya-message");
      el.textContent = text; el.classList.toggle("ok", ok);
    }
    wire() {
      const on = (id, ev, fn) => this.$(id).addEventListener(ev, fn);
      on("alaya-prompt-form", "submit", (ev) => {
        ev.preventDefault();
        const text = this.$("alaya-prompt").value.trim();
        if (text) this.send({ type: "prompt", text, transition: this.transition() });
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
      const tl = this.timeline;
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
        try { tl.set(await api("GET", "/api/ui/schedules/eight_worlds")); } catch (err) { this.say(err.message); }
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
    }
  }

  // Entry point, called by the Gradio HTML component once its markup is in the page.
  window.AlayaStudio = {
    start(root) {
      if (window.alayaStudio) return window.alayaStudio;
      const studio = new Studio(root.querySelector("#alaya-studio") || root);
      window.alayaStudio = studio;             // handle for the browser tests and the console
      studio.start().catch((err) => studio.say(`the studio could not start: ${err.message}`));
      return studio;
    },
  };
})();
