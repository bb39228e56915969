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
    const g = c.getContext("2d"), w = c.width, h = c.height;
    g.clearRect(0, 0, w, h);
    g.font = "11px ui-monospace, monospace";
    const entries = [[this.title, "#ccc"]];
    let k = 0;
    for (const [name, s] of this.series) {
      entries.push([`${name} ${s[s.length - 1].toFixed(1)}${this.unit}`, COLORS[k++ % COLORS.length]]);
    }
    // the legend wraps onto more lines rather than running past a narrow canvas; the plot sits below it
    this.legendBoxes = [];
    let x = 4, line = 0;
    for (const [text, color] of entries) {
      const tw = g.measureText(text).width;
      if (x > 4 && x + tw > w - 2) { x = 4; line += 1; }
      g.fillStyle = color; g.fillText(text, x, 11 + 13 * line);
      this.legendBoxes.push({ text, x, width: tw, line });
      x += tw + 8;
    }
    const top = 14 + 13 * line;
    let max = this.guide || 1;
    for (const s of this.series.values()) for (const v of s) max = Math.max(max, v);
    max *= 1.1;
    const y = (v) => h - 2 - (v / max) * (h - top - 4);
    if (this.guide) {               // dashed target line, e.g. the session's fps
      g.strokeStyle = "#555"; g.setLineDash([4, 4]);
      g.beginPath(); g.moveTo(0, y(this.guide)); g.lineTo(w, y(this.guide)); g.stroke();
      g.setLineDash([]);
    }
    k = 0;
    for (const s of this.series.values()) {
      g.strokeStyle = COLORS[k++ % COLORS.length]; g.lineWidth = 1.5; g.beginPath();
      s.forEach((v, i) => {         // newest sample at the right edge
        const px = w - (s.length - 1 - i) * (w / this.capacity);
        i ? g.lineTo(px, y(v)) : g.moveTo(px, y(v));
      });
      g.stroke();
    }
  }
}
