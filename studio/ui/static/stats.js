// Stats: FPS, latency and per-stage ms/frame charts from the per-frame status, and the `stats` line.
// Mixed into the Studio (studio.js).
import { LineChart } from "./charts.js";
import { plural } from "./words.js";

const STATS_MS = 2000, DRAW_MS = 250;

export const stats = {
  buildCharts() {
    this.charts = [
      new LineChart(this.$("alaya-chart-fps"), { title: "FPS", guide: 30 }),
      new LineChart(this.$("alaya-chart-latency"), { title: "latency", unit: " ms" }),
      new LineChart(this.$("alaya-chart-stages"), { title: "ms/frame", unit: "" }),
    ];
    setInterval(() => this.charts.forEach((c) => c.draw()), DRAW_MS);
    setInterval(() => this.send({ type: "stats" }), STATS_MS);
  },
  chartStatus(m) {
    this.charts[0].push({ fps: m.fps });
    // server: render start → sent; glass-to-glass (while measuring): render start → on screen, median of 2 s
    const sent = { "render → send": m.latency_ms };
    this.charts[1].push(this.measuring && this.latencyNow ? { ...sent, "glass-to-glass": this.latencyNow.median } : sent);
    const per = m.chunk_size || 1, stages = {};
    for (const [k, v] of Object.entries(m.stages_ms || {})) stages[k] = v / per;
    this.charts[2].push(stages);
  },
  onStats(m) {
    this.statsLine = `${m.codec || "?"} · ${m.bitrate ? (m.bitrate / 1e6).toFixed(2) + " Mbit/s" : ""} · first frame ` +
      `${m.time_to_first_frame_ms ?? "–"} ms · ${plural(m.frames_sent, "frame")} sent` +
      (m.errors ? ` · ${plural(m.errors, "request")} refused` : "");
  },
};
