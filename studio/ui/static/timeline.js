// Timeline editor: one lane of prompt segments over a frame ruler, editing a Schedule JSON document
// (studio/schedule/model.py; docs/schedule.md). The document is the single state: every edit produces a new
// document, pushed on the undo stack and handed to `onChange` (which applies it to the live session).
const clone = (x) => JSON.parse(JSON.stringify(x));
const MIN_VIEW = 300;          // frames shown for an open-ended schedule beyond its last start
const MAX_UNDO = 200;
const LINEAR = Array.from({ length: 17 }, (_, k) => k / 16);

// a preset's colour ("#rrggbb") as the browser reports a style ("rgb(r, g, b)"), for isLight
const hexRgb = (hex) => (/^#[0-9a-f]{6}$/i.test(hex)
  ? `rgb(${[1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16)).join(", ")})` : hex);
// Whether a CSS colour ("rgb(r, g, b)", as the browser reports a style) is light: relative luminance over 0.5.
function isLight(rgb) {
  const [r, g, b] = (rgb.match(/\d+(\.\d+)?/g) || [0, 0, 0]).map((v) => (+v / 255) ** 2.2);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 ** 2.2;
}

export function promptName(seg) {
  return seg.prompts.map((p) => p.preset || p.text).join(" + ");
}
// What a block says: its style by the tile's title (`titles`: preset name → title); a blend names every style with
// its share in whole per cents, as played ("Cyberpunk 1% + Volcano 99%"; the weights of a block sum to 1).
export function blockLabel(seg, titles = {}) {
  const names = seg.prompts.map((p) => (p.preset && titles[p.preset]) || p.preset || p.text);
  if (seg.prompts.length < 2) return names[0];
  const total = seg.prompts.reduce((sum, p) => sum + (p.weight ?? 1), 0) || 1;
  return seg.prompts.map((p, k) => `${names[k]} ${Math.round(100 * (p.weight ?? 1) / total)}%`).join(" + ");
}
const FREE_TEXT = "#5d6472";   // a block of free text: no tile, no colour of its own
// A block is painted in each style's colour, in bands as tall as its share (a 0.99 volcano blend is volcano with a
// sliver of cyberpunk); → [CSS background, the colour of its largest share, for the text's contrast].
function blockPaint(seg, colors) {
  const total = seg.prompts.reduce((sum, p) => sum + (p.weight ?? 1), 0) || 1;
  const bands = seg.prompts.map((p) => [(p.preset && colors[p.preset]) || FREE_TEXT, (p.weight ?? 1) / total]);
  const main = bands.reduce((a, b) => (b[1] > a[1] ? b : a))[0];
  if (bands.length < 2) return [main, main];
  let at = 0;
  const stops = bands.map(([c, share]) => `${c} ${(100 * at).toFixed(2)}% ${(100 * (at += share)).toFixed(2)}%`);
  return [`linear-gradient(to bottom, ${stops.join(", ")})`, main];
}
// What a box's text means is the server's to say (prompt_presets.resolve_prompt: preset names and aliases in
// any case, else free text): the page sends text and shows the schedule the session accepted.
export function promptSpec(name) {
  return { text: String(name).trim() };
}

export class Timeline {
  // `curves`: easing name → its weights at 0, 1/n … 1, sampled by the server from the curves it renders
  // (GET /api/ui/config), so the ramp drawn is the ramp rendered.
  constructor(root, { presets, curves, onChange, onSeek, onSelect }) {
    this.root = root;
    this.curves = curves || {};
    this.ruler = root.querySelector(".tl-ruler");
    this.lane = root.querySelector(".tl-lane");
    this.playheadEl = root.querySelector(".tl-playhead");
    this.colors = Object.fromEntries(presets.map((p) => [p.name, p.color]));
    this.titles = Object.fromEntries(presets.map((p) => [p.name, p.title]));
    this.zoom = 1;     // × the panel's width (timeline-zoom.js): 5-frame blocks wide enough to read
    this.onChange = onChange; this.onSeek = onSeek; this.onSelect = onSelect || (() => {});
    this.undoStack = []; this.redoStack = [];
    this.selected = 0; this.playhead = 0; this.extent = 0;
    this.doc = { version: 1, fps: 30, segments: [{ start: 0, prompts: [{ preset: presets[0].name }] }] };
    this.ruler.addEventListener("pointerdown", (ev) => this.onSeek(this.frameAt(ev.clientX)));
    new ResizeObserver(() => this.render()).observe(root);
  }

  // ---- geometry -----------------------------------------------------------------------------------------
  get segments() { return this.doc.segments; }
  // The ruler fits what plays: a looping schedule its length; a schedule with a length that length, growing past
  // it while the last block holds (so the playhead never leaves the view); an open schedule on a recorded
  // source the source's length; an open one on a live source its last start plus MIN_VIEW, growing likewise.
  get viewFrames() {
    const doc = this.doc, last = this.segments[this.segments.length - 1].start;
    if (doc.length && doc.loop) return doc.length;
    if (doc.length) return Math.max(doc.length, this.extent);
    if (this.sourceFrames) return Math.max(this.sourceFrames, last + 1, this.extent);
    return Math.max(last + MIN_VIEW, MIN_VIEW * 2, this.extent);
  }
  // the frames of the recorded source being played (from the session's hello), or null for a live source
  // (a new session: the old one's playhead and the view it grew to are gone with it)
  setSource(frames) { this.sourceFrames = frames || null; this.extent = 0; this.playhead = 0; this.render(); }
  blockAt(frame) { let k = 0; while (k + 1 < this.segments.length && this.segments[k + 1].start <= frame) k++; return k; }
  end(i) { return i + 1 < this.segments.length ? this.segments[i + 1].start : this.viewFrames; }
  // the width the whole view is drawn at: the panel's, times the zoom (the panel then scrolls sideways)
  get width() { return (this.root.clientWidth || 600) * this.zoom; }
  x(frame) { return (frame / this.viewFrames) * this.width; }
  frameAt(clientX) {
    const r = this.root.getBoundingClientRect(), px = clientX - r.left - this.root.clientLeft + this.root.scrollLeft;
    return Math.max(0, Math.min(this.viewFrames - 1, Math.round((px / this.width) * this.viewFrames)));
  }

  // a line about the session's timeline shown with the selection info (e.g. how a live switch on a loop plays)
  note(text) { this.noteText = text; this.onSelect(this.selected, this.segments[this.selected]); }

  // ---- document -----------------------------------------------------------------------------------------
  set(doc, { record = true, notify = true } = {}) {
    if (record) {
      this.undoStack.push(clone(this.doc)); this.redoStack = [];
      if (this.undoStack.length > MAX_UNDO) this.undoStack.shift();
    }
    this.doc = clone(doc);
    this.selected = Math.min(this.selected, this.segments.length - 1);
    this.render();
    if (notify) this.onChange(this.doc);
  }
  edit(fn) { const d = clone(this.doc); fn(d); this.set(normalize(d)); }
  undo() { this.step(this.undoStack, this.redoStack); }
  redo() { this.step(this.redoStack, this.undoStack); }
  step(from, to) {
    if (!from.length) return;
    to.push(clone(this.doc));
    this.set(from.pop(), { record: false });
  }

  add(name, transition) {
    this.edit((d) => {
      let f = Math.min(this.playhead, this.viewFrames - 1);
      while (d.segments.some((s) => s.start === f)) f += 1;
      const seg = { start: f, prompts: [promptSpec(name)] };
      seg.transition = f > 0 && transition > 0 ? { kind: "linear", frames: transition, easing: "linear" } : { kind: "cut" };
      d.segments.push(seg);
      d.segments.sort((a, b) => a.start - b.start);
      this.selected = d.segments.indexOf(seg);
    });
  }
  split() {
    const i = this.selected, a = this.segments[i].start, b = this.end(i);
    const at = this.playhead > a && this.playhead < b ? this.playhead : Math.floor((a + b) / 2);
    if (at <= a) return;
    this.edit((d) => {
      const copy = clone(d.segments[i]); copy.start = at; copy.transition = { kind: "cut" };
      d.segments.splice(i + 1, 0, copy);
    });
  }
  remove() {
    if (this.segments.length < 2) return;
    this.edit((d) => { d.segments.splice(this.selected, 1); });
  }
  updateSelected({ prompt, kind, frames, easing }) {
    const i = this.selected;
    this.edit((d) => {
      const s = d.segments[i];
      if (prompt && prompt.trim() && prompt.trim() !== promptName(s)) s.prompts = [promptSpec(prompt)];
      s.transition = kind === "cut" || i === 0 ? { kind: "cut" } : { kind, frames: Math.max(1, frames | 0), easing };
    });
  }

  // ---- drawing ------------------------------------------------------------------------------------------
  render() {
    const fps = this.doc.fps || 30, view = this.viewFrames, width = this.width;
    // ruler: a labelled tick every `step` seconds, minor ticks at a fifth of it
    const secs = view / fps, step = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300].find((s) => secs / s <= width / 70) || 600;
    const ticks = [];
    for (let s = 0; s * fps < view; s += step / 5) {
      const major = Math.abs(s / step - Math.round(s / step)) < 1e-6;
      const label = major ? s.toFixed(step < 1 ? 1 : 0) + "s" : "";
      ticks.push(`<div class="tl-tick${major ? "" : " minor"}" style="left:${this.x(s * fps)}px">${label}</div>`);
    }
    if (this.doc.length && view > this.doc.length)     // past the schedule's end: its last block holds
      ticks.push(`<div class="tl-end" style="left:${this.x(this.doc.length)}px" title="end of the schedule"></div>`);
    this.ruler.innerHTML = ticks.join("");
    this.ruler.style.width = this.lane.style.width = width + "px";
    const focused = this.lane.contains(document.activeElement);     // a keyboard user's focus survives a redraw
    this.lane.innerHTML = "";
    this.segments.forEach((seg, i) => this.lane.appendChild(this.block(seg, i)));
    if (focused) this.lane.querySelector(".tl-block.selected")?.focus();
    this.setPlayhead(this.playhead);
    this.onSelect(this.selected, this.segments[this.selected]);
  }

  block(seg, i) {
    const el = document.createElement("div");
    const left = this.x(seg.start), w = Math.max(4, this.x(this.end(i)) - left);
    el.className = "tl-block" + (i === this.selected ? " selected" : "");
    el.dataset.index = i; el.dataset.start = seg.start;
    // one Tab stop for the lane, on the selected block; the arrows move it (keyboard.js)
    el.tabIndex = i === this.selected ? 0 : -1; el.setAttribute("role", "option");
    el.setAttribute("aria-selected", String(i === this.selected));
    el.style.left = left + "px"; el.style.width = w + "px";
    const [paint, main] = blockPaint(seg, this.colors);
    el.style.background = paint;
    el.classList.toggle("light", isLight(hexRgb(main)));     // dark text on light blocks (polar)
    el.title = `${blockLabel(seg, this.titles)} — frames ${seg.start}..${this.end(i) - 1}`;
    const t = seg.transition || { kind: "cut" };
    let ramp = "";
    if (t.kind !== "cut" && t.frames) {
      // the transition drawn as a ramp: the new prompt's weight rising over its frames
      const rw = Math.max(2, this.x(t.frames)), curve = this.curves[t.easing || "linear"] || LINEAR;
      const pts = curve.map((w, k) => `${(k / (curve.length - 1)) * rw},${60 - 60 * w}`);
      ramp = `<svg class="tl-ramp" width="${rw}" viewBox="0 0 ${rw} 60" preserveAspectRatio="none">` +
        `<polygon points="0,60 ${pts.join(" ")} ${rw},60" fill="rgba(0,0,0,.35)"/>` +
        `<polyline points="${pts.join(" ")}" fill="none" stroke="#fff" stroke-width="1.5"/></svg>`;
    }
    // knob at the ramp's top end: drag it to lengthen or shorten the transition (to the left edge = cut)
    const knob = i > 0 ? `<div class="tl-ramp-knob" style="left:${t.kind === "cut" ? 0 : this.x(t.frames || 0)}px"` +
      ` title="drag: transition length"></div>` : "";
    el.innerHTML = ramp + `<div class="tl-label"></div><div class="tl-trans"></div>${knob}<div class="tl-resize"></div>`;
    el.querySelector(".tl-label").textContent = blockLabel(seg, this.titles);
    el.querySelector(".tl-trans").textContent = t.kind === "cut" ? "cut" : `${t.kind} ${t.frames}f${t.easing && t.easing !== "linear" ? ` ${t.easing}` : ""}`;
    el.addEventListener("pointerdown", (ev) => {
      const part = ev.target.classList.contains("tl-resize") ? "end" :
        ev.target.classList.contains("tl-ramp-knob") ? "ramp" : "body";
      this.startDrag(ev, i, part);
    });
    return el;
  }

  setPlayhead(frame) {
    this.playhead = frame;
    if (frame >= this.viewFrames && !(this.doc.length && this.doc.loop)) {
      this.extent = frame + (this.sourceFrames ? 1 : MIN_VIEW); this.render(); return;
    }
    this.playheadEl.style.left = this.x(frame) + "px";
  }

  // Drag the body: the block moves, its length kept, and pushes every block after it by as much (none of them
  // changes length; the block before it ends where it now starts). The right edge: its end moves, pushing
  // the blocks after it the same way. The ramp knob: its transition length changes.
  startDrag(ev, i, part) {
    if (part === "ramp") return this.dragRamp(ev, i);
    const resize = part === "end";
    ev.preventDefault(); ev.stopPropagation();
    this.select(i);
    const segs = this.segments, el = ev.currentTarget;
    const x0 = ev.clientX, start = segs[i].start, end = this.end(i), perPx = this.viewFrames / this.width;
    const hasNext = i + 1 < segs.length;
    const lo = i > 0 ? segs[i - 1].start + 1 : 0;                               // lowest start it may take
    // push: the blocks after it move by as much, so the last one's start bounds the move
    const room = this.viewFrames - 1 - segs[segs.length - 1].start;
    let delta = 0;
    const move = (e) => {
      delta = Math.round((e.clientX - x0) * perPx);
      if (resize) {
        delta = Math.max(start + 1 - end, Math.min(hasNext ? room : this.viewFrames - end, delta));
        el.style.width = this.x(end + delta) - this.x(start) + "px";
      } else if (i > 0) {
        delta = Math.max(lo - start, Math.min(room, delta));
        el.style.left = this.x(start + delta) + "px";
      } else {
        delta = 0;                                     // the first segment always starts at frame 0
      }
    };
    const up = () => {
      window.removeEventListener("pointermove", move); window.removeEventListener("pointerup", up);
      if (!delta) return;
      this.edit((d) => {
        for (let k = resize ? i + 1 : i; k < d.segments.length; k++) d.segments[k].start += delta;
        if (resize && !hasNext && d.length) d.length = end + delta;
      });
    };
    window.addEventListener("pointermove", move); window.addEventListener("pointerup", up);
  }

  dragRamp(ev, i) {
    ev.preventDefault(); ev.stopPropagation();
    this.select(i);
    const seg = this.segments[i], knob = ev.target, t0 = seg.transition || { kind: "cut" };
    const f0 = t0.kind === "cut" ? 0 : t0.frames, maxF = this.end(i) - seg.start;
    const x0 = ev.clientX, perPx = this.viewFrames / this.width;
    let frames = f0;
    const move = (e) => {
      frames = Math.max(0, Math.min(maxF, f0 + Math.round((e.clientX - x0) * perPx)));
      knob.style.left = this.x(frames) + "px";
    };
    const up = () => {
      window.removeEventListener("pointermove", move); window.removeEventListener("pointerup", up);
      if (frames === f0) return;
      this.edit((d) => {
        d.segments[i].transition = frames === 0 ? { kind: "cut" } :
          { kind: t0.kind === "cut" ? "linear" : t0.kind, frames, easing: t0.easing || "linear" };
      });
    };
    window.addEventListener("pointermove", move); window.addEventListener("pointerup", up);
  }

  select(i) {
    this.selected = i;
    this.lane.querySelectorAll(".tl-block").forEach((b, k) => {
      b.classList.toggle("selected", k === i); b.tabIndex = k === i ? 0 : -1; b.setAttribute("aria-selected", String(k === i));
    });
    this.onSelect(i, this.segments[i]);
  }
}

// Keep the document valid for the server: sorted distinct starts, the first at 0 with a cut,
// transitions no longer than the schedule, the last start inside its length.
export function normalize(d) {
  d.segments.sort((a, b) => a.start - b.start);
  d.segments = d.segments.filter((s, k) => k === 0 || s.start !== d.segments[k - 1].start);
  d.segments[0].start = 0; d.segments[0].transition = { kind: "cut" };
  if (d.length) {
    d.segments = d.segments.filter((s, k) => k === 0 || s.start < d.length);
    for (const s of d.segments) if (s.transition && s.transition.frames > d.length) s.transition.frames = d.length;
  }
  return d;
}

