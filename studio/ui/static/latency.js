// Glass-to-glass latency, measured in the page (docs/ui.md#glass-to-glass-latency). Mixed into the Studio.
//
// While "measure" is on, the server draws each frame's index into the picture's top-left corner (the frame
// stamp, webrtc/stamp.py). For every frame the browser presents, requestVideoFrameCallback gives the time it is
// expected on screen; the page reads the stamp back from that very picture (a small canvas) and subtracts the
// time the server started rendering that frame (`rendered_wall` of its status message). The two clocks are
// put on one by ping/pong over the data channel (the offset from the round trip with the least delay), so the
// figure holds across machines too. Off, nothing is stamped and nothing is measured.

const BITS = 16, PING_MS = 1000, PINGS_KEPT = 8, WINDOW_MS = 2000, RENDERED_KEPT = 600, LOG_KEPT = 20000;
const wallNow = () => performance.timeOrigin + performance.now();

// the stamp's cell size for a picture `width` wide: the same rule as webrtc/stamp.py cell_size
const cellSize = (width) => Math.max(4, Math.min(16, Math.floor(width / (BITS + 4))));

export const latency = {
  buildLatency() {
    this.rendered = new Map();            // frame index mod 2^16 → what its status said (see noteRendered)
    this.pings = [];                      // recent {rtt, offset}; offset = server clock − page clock
    this.g2g = [];                        // recent {at, ms}
    this.g2gLog = [];                     // every sample since measuring began (bench/browser_latency_bench.py)
    this.presentedLog = [];               // {frame, at (page wall ms on screen), control} while measuring
    this.keyLog = [];                     // {key, down, at (page wall ms)}: drive keys sent (drive.js)
    this.stampCanvas = document.createElement("canvas");
    this.screenDelays = [];               // recent {at, ms}: a frame sent → on this screen (noteScreenDelay below)
    this.reportedDelay = null;
    this.$("alaya-measure").addEventListener("change", (ev) => this.measure(ev.target.checked));
    // the clock offset serves measuring, and the screen delay that quantized switches are placed ahead by
    setInterval(() => { if (this.timingFrames()) { this.ping(); this.reportScreenDelay(); } }, PING_MS);
  },
  // presented frames are watched while measuring, or while switches are quantized (their screen delay)
  timingFrames() { return this.measuring || Boolean(this.quantize); },
  // (re)applied on every new session: the stamp is the session's, the checkbox the page's
  measure(on = this.$("alaya-measure").checked) {
    this.measuring = on;
    this.g2g = []; this.g2gLog = []; this.presentedLog = [];
    this.$("alaya-g2g").textContent = on ? "glass-to-glass: waiting for stamped frames…" : "";
    if (this.channel?.readyState === "open") this.send({ type: "stamp", on });
    if (on) this.ping();
    if (on) this.watchFrames();
    if (on && !("requestVideoFrameCallback" in this.video))
      this.$("alaya-g2g").textContent = "glass-to-glass: this browser has no requestVideoFrameCallback";
  },
  ping() { this.send({ type: "ping", t: wallNow() }); },
  noteRendered(m) {
    if (m.rendered_wall === undefined) return;
    // From the chunk's start: its frames came from the source (take), this frame was rendered and handed over
    // (ready), it left the studio's pacing to the encoder (latency). A chunk's later frames wait for their turn.
    const take = m.take_ms ?? 0, ready = m.ready_ms ?? take;
    // began: the server's wall ms its render started; sent: when it left the studio's pacing, to the encoder
    this.lastEncode = m.encode_ms ?? this.lastEncode;
    this.rendered.set(m.frame % 65536, { began: m.rendered_wall * 1e3, sent: m.rendered_wall * 1e3 + m.latency_ms,
                                         take, render: ready - take, wait: m.latency_ms - ready,
                                         encode: m.encode_ms, control: m.control, label: m.label });
    if (this.rendered.size > RENDERED_KEPT) this.rendered.delete(this.rendered.keys().next().value);
  },
  onPong(m) {
    const rtt = wallNow() - m.t;
    this.pings.push({ rtt, offset: m.server_ms - (m.t + rtt / 2) });
    if (this.pings.length > PINGS_KEPT) this.pings.shift();
  },
  clockOffset() {
    if (!this.pings.length) return null;
    return this.pings.reduce((a, b) => (b.rtt < a.rtt ? b : a)).offset;
  },
  watchFrames() {
    if (this.frameCallback || !("requestVideoFrameCallback" in this.video)) return;
    this.frameCallback = this.video.requestVideoFrameCallback((now, meta) => {
      this.frameCallback = null;
      if (!this.timingFrames()) return;
      this.onPresented(meta);
      this.watchFrames();
    });
  },
  onPresented(meta) {
    if (!this.measuring) return this.estimateScreenDelay(meta);
    const index = this.readStamp(), offset = this.clockOffset();
    const frame = index === null ? undefined : this.rendered.get(index);
    if (frame === undefined || offset === null) return;
    // on screen at expectedDisplayTime (page clock) → on the server's clock → minus the render's start
    const shown = performance.timeOrigin + meta.expectedDisplayTime, ms = shown + offset - frame.began;
    this.noteSwitchPresented(frame.label, shown);
    this.noteScreenDelay(shown + offset - frame.sent);
    const at = wallNow();
    if (this.presentedLog.length < LOG_KEPT)
      this.presentedLog.push({ frame: index, at: shown, control: frame.control, stages: this.stages(frame, meta, offset) });
    this.g2g.push({ at, ms });
    if (this.g2gLog.length < LOG_KEPT) this.g2gLog.push(ms);
    while (this.g2g.length && at - this.g2g[0].at > WINDOW_MS) this.g2g.shift();
    const sorted = this.g2g.map((s) => s.ms).sort((a, b) => a - b);
    const pick = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    this.$("alaya-g2g").textContent =
      `glass-to-glass ${pick(0.5).toFixed(0)} ms median · ${pick(0.95).toFixed(0)} ms p95 (last 2 s)`;
    this.latencyNow = { median: pick(0.5), p95: pick(0.95), samples: sorted.length };
  },
  // The screen delay: a frame leaving the studio's pacing → on this screen. The studio places a quantized or timed
  // switch that much before its beat (docs/datachannel.md), so the new style is on screen on the beat. Exact while
  // measuring (the stamp names the frame, its status says when it was sent); otherwise packet received → on
  // screen (requestVideoFrameCallback) plus half the best ping round trip and the last frame's encode.
  estimateScreenDelay(meta) {
    if (meta.receiveTime === undefined || !this.pings.length) return;
    const rtt = Math.min(...this.pings.map((p) => p.rtt));
    this.noteScreenDelay(meta.expectedDisplayTime - meta.receiveTime + rtt / 2 + (this.lastEncode ?? 0));
  },
  noteScreenDelay(ms) {
    const at = wallNow();
    this.screenDelays.push({ at, ms });
    while (this.screenDelays.length && at - this.screenDelays[0].at > WINDOW_MS) this.screenDelays.shift();
  },
  // the median of the last 2 s, sent when it moved by 2 ms or more
  reportScreenDelay() {
    if (this.screenDelays.length < 5) return;
    const sorted = this.screenDelays.map((s) => s.ms).sort((a, b) => a - b);
    const ms = Math.round(Math.min(2000, Math.max(0, sorted[Math.floor(sorted.length / 2)])));
    if (this.reportedDelay !== null && Math.abs(ms - this.reportedDelay) < 2) return;
    if (this.send({ type: "screen_delay", ms })) this.reportedDelay = ms;
  },
  // Where one frame's milliseconds went (BENCHMARKS.md, latency breakdown): the server's own figures from its
  // status, the browser's from requestVideoFrameCallback (receiveTime: its last packet arrived; processingDuration:
  // decode). "display" is the jitter buffer plus the wait for the compositor's frame.
  stages(frame, meta, offset) {
    if (meta.receiveTime === undefined) return null;
    const received = performance.timeOrigin + meta.receiveTime, decode = (meta.processingDuration ?? 0) * 1e3;
    const encode = frame.encode ?? 0;
    return { take: frame.take, render: frame.render, wait: frame.wait, encode,
             network: received + offset - frame.sent - encode, decode, display: performance.timeOrigin + meta.expectedDisplayTime - received - decode };
  },
  // The stamp of the picture on screen now, or null: row 0 holds the bits (white = 1), row 1 the same inverted.
  readStamp() {
    const w = this.video.videoWidth, c = cellSize(w);
    if (!w || this.video.videoHeight < 2 * c) return null;
    const canvas = this.stampCanvas, sw = BITS * c, sh = 2 * c;
    if (canvas.width !== sw || canvas.height !== sh) { canvas.width = sw; canvas.height = sh; }
    const ctx = canvas.getContext("2d", { willReadFrequently: true });
    ctx.drawImage(this.video, 0, 0, sw, sh, 0, 0, sw, sh);
    const px = ctx.getImageData(0, 0, sw, sh).data;
    const luma = (x, y) => { const i = 4 * (y * sw + x); return (px[i] + px[i + 1] + px[i + 2]) / 3; };
    const mid = Math.floor(c / 2);
    let value = 0;
    for (let b = 0; b < BITS; b++) {
      const top = luma(b * c + mid, mid), bottom = luma(b * c + mid, c + mid);
      if (Math.abs(top - bottom) < 64) return null;   // not a stamp (measuring just started, or a codec smear)
      value = value * 2 + (top > bottom ? 1 : 0);
    }
    return value;
  },
};
