// Live line charts on <canvas>: a fixed-size ring of samples per series, redrawn at most a few times a second.
const COLORS = ["#ff8a3d", "#4fc3f7", "#7bd88f", "#e57373", "#ba68c8", "#fff176", "#90a4ae"];

export class LineChart {
  constructor(canvas, { title, unit = "", capacity = 300, guide = null }) {
    this.canvas = canvas; this.title = title; this.unit = unit; this.capacity = capacity; this.guide = guide;
    this.series = new Map();      // name → array of numbers (newest last)
    this.dirty = false;
  }
  push(values) {                  // {name: number}
    for (const [name, v] of Object.entries(values)) {
      if (typeof v !== "number" || !isFinite(v)) continue;
      if (!this.series.has(name)) this.series.set(name, []);
      const s = this.series.get(name);
      s.push(v); if (s.length > this.capacity) s.shift();
    }
    this.dirty = true;
  }
  draw() {
    if (!this.dirty) return;
    this.dirty = false;
    const c = this.canvas;
    if (c.clientWidth && c.width !== c.clientWidth) c.width = c.clientWidth;   // 1 canvas px per CSS px
    const g = c.getContext("2d"), w = c.width, h = c.height, top = 14;
    g.clearRect(0, 0, w, h);
    let max = this.guide || 1;
    for (const s of this.series.values()) for (const v of s) max = Math.max(max, v);
    max *= 1.1;
    const y = (v) => h - 2 - (v / max) * (h - top - 4);
    if (this.guide) {               // dashed target line, e.g. the session's fps
      g.strokeStyle = "#555"; g.setLineDash([4, 4]);
      g.beginPath(); g.moveTo(0, y(this.guide)); g.lineTo(w, y(this.guide)); g.stroke();
      g.setLineDash([]);
    }
    let k = 0, legend = [];
    for (const [name, s] of this.series) {
      const color = COLORS[k++ % COLORS.length];
      g.strokeStyle = color; g.lineWidth = 1.5; g.beginPath();
      s.forEach((v, i) => {         // newest sample at the right edge
        const px = w - (s.length - 1 - i) * (w / this.capacity);
        i ? g.lineTo(px, y(v)) : g.moveTo(px, y(v));
      });
      g.stroke();
      legend.push([name, color, s[s.length - 1]]);
    }
    g.font = "11px ui-monospace, monospace"; let x = 4;
    g.fillStyle = "#ccc"; g.fillText(this.title, x, 11); x += g.measureText(this.title).width + 10;
    for (const [name, color, last] of legend) {
      const text = `${name} ${last.toFixed(1)}${this.unit}`;
      g.fillStyle = color; g.fillText(text, x, 11); x += g.measureText(text).width + 8;
    }
  }
}
