// What a visitor picks: the preset gallery, the prompt box's transition, the blend, the source and uploads.
// Mixed into the Studio (studio.js).
import { api, authorized } from "./api.js";

const UNSTYLED = "original";     // what free text that matches no style renders as (prompt_presets.matching)
const CLEAR_MATCH = 50;         // a top share (in whole per cent, as shown) under this is a mix, not a match
const PENDING = "pending";      // the box's text was sent; what it names is being looked up
const BOX_AWAIT_MS = 10000;     // how long the box keeps what it sent against other frames, before it has played
const TEXT = "text:";           // a blend picker's value for free text (preset names have no colon)

// One prompt of a frame's status (or the box's text, resolved) as a comparable key.
const promptKey = (p) => p.preset ? `preset:${p.preset}` : `${TEXT}${p.text}`;

// Free text's meaning, said plainly when it is not a match: nothing matched (shown unstyled), or a weak mix.
// Styles are named by their tiles' titles; the rule is judged on the per cents the line shows.
function freeTextMeaning(mapsTo, titleOf) {
  const shares = mapsTo.map(([name, w]) => [titleOf(name), Math.round(w * 100)]);
  const mix = shares.map(([title, pct]) => `${title} ${pct}%`).join(" · ");
  if (mapsTo.length === 1 && mapsTo[0][0] === UNSTYLED)
    return `nothing in this text matches a style: the picture is shown unstyled (${titleOf(UNSTYLED)})`;
  if (shares[0][1] < CLEAR_MATCH) return `no style clearly matches; shown as a mix: ≈ ${mix}`;
  return `≈ ${mix}`;
}

export const gallery = {
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
  },
  setPreset(name) {
    this.send({ type: "preset", name, transition: this.transition() });
    this.markActive(name);
    this.$("alaya-prompt-match").textContent = "";      // it described the prompt box's text, no longer playing
    this.blendTouched = false;
    this.boxAwaits = undefined;                         // superseded: it may never play
    this.blendFrom(name);
  },
  // `name`: the dominant preset of the frame on screen; its tile is outlined only while that preset plays alone
  // (`alone`), not while a blend of it with another style plays.
  markActive(name, alone = true) {
    this.activePreset = name;
    const outlined = alone ? name : null;
    if (outlined === this.outlined) return;
    this.outlined = outlined;
    for (const t of this.root.querySelectorAll(".alaya-tile")) t.classList.toggle("active", t.dataset.preset === outlined);
    if (outlined && !this.blendTouched) this.blendFrom(outlined);
  },
  // Under the prompt box: which preset the text names, or which presets free text renders as. The box now names
  // what it sent (`boxNames`), which it keeps while that plays (followPlaying).
  async showMeaning(text) {
    const el = this.$("alaya-prompt-match");
    this.boxEdited = false; this.boxNames = PENDING; this.boxAwaits = undefined;
    try {
      const m = await api("GET", `/api/ui/prompt?text=${encodeURIComponent(text)}`);
      el.textContent = m.preset ? `preset ${this.titleOf(m.preset)}`
                                : freeTextMeaning(m.maps_to, (name) => this.titleOf(name));
      if (this.boxNames === PENDING) {
        this.boxNames = promptKey(m.preset ? { preset: m.preset } : { text });
        // until it plays, frames of what played before (a switch sent earlier that lands late under load) must
        // not take the box back
        if (!(this.playingPrompts || []).some((p) => promptKey(p) === this.boxNames)) {
          this.boxAwaits = this.boxNames; this.boxAwaitsSince = performance.now();
        }
      }
    } catch (err) { el.textContent = ""; if (this.boxNames === PENDING) this.boxNames = undefined; }
  },
  // The studio refused what the box sent: it will never play, so the box follows what plays again.
  boxRefused() { this.boxAwaits = undefined; },
  titleOf(name) { return this.presets.find((p) => p.name === name)?.title || name; },
  // The prompt box and the blend follow what plays (docs/ui.md, "Prompt", "Blend"); `prompts` are the frame's,
  // from its status. Only a change of what plays (not of the weights) moves them.
  followPlaying(prompts) {
    const key = prompts.map(promptKey).join(" + ");
    if (key === this.playingKey) return;
    this.playingKey = key; this.playingPrompts = prompts;
    const alone = prompts.length === 1 ? prompts[0] : null;
    this.followBox(prompts, alone);
    if (alone && !alone.preset && !this.blendTouched) this.blendFromText(alone.text);
  },
  // The box says what plays: a style alone by its tile's title, free text as itself, nothing for a mix it has no
  // part in. What the visitor typed and has not sent is never overwritten, and what the box sent stays while it
  // plays (in its transition too).
  followBox(prompts, alone) {
    const box = this.$("alaya-prompt");
    if (this.boxAwaits !== undefined) {
      // another front door (OSC, the timeline) may supersede it before it plays: the wait has a bound
      const waiting = performance.now() - this.boxAwaitsSince < BOX_AWAIT_MS;
      if (waiting && !prompts.some((p) => promptKey(p) === this.boxAwaits)) return;
      this.boxAwaits = undefined;
    }
    if (this.boxEdited || this.boxNames === PENDING || prompts.some((p) => promptKey(p) === this.boxNames)) return;
    box.value = alone ? (alone.preset ? this.titleOf(alone.preset) : alone.text) : "";
    this.boxNames = alone ? promptKey(alone) : undefined;
    this.$("alaya-prompt-match").textContent = "";      // it described the box's old text
  },
  transition() { return Math.max(0, parseInt(this.$("alaya-transition").value, 10) || 0); },

  buildBlend() {
    for (const [id, k] of [["alaya-blend-a", 0], ["alaya-blend-b", 1]]) {
      const sel = this.$(id);
      for (const p of this.presets) sel.add(new Option(p.title, p.name));
      sel.selectedIndex = k;
    }
    // the visitor's own blend stays as they set it; until they touch it, it starts from the style on screen
    for (const id of ["alaya-blend", "alaya-blend-a", "alaya-blend-b"])
      this.$(id).addEventListener("input", () => { this.blendTouched = true; });
  },
  // The blend as a starting point from `name`: it on the left, the slider at 0, another style on the right.
  blendFrom(name) {
    const a = this.$("alaya-blend-a"), b = this.$("alaya-blend-b");
    a.value = name; this.$("alaya-blend").value = 0;
    if (b.value === name) b.value = (this.hotkeyPresets.find((p) => p.name !== name) || this.presets[0]).name;
  },
  // Free text playing alone is the blend's starting point like a style: one option on the left picker holds it
  // (the latest free text), so moving the slider mixes that text, not the style that played before it.
  blendFromText(text) {
    const a = this.$("alaya-blend-a");
    let option = a.querySelector("option.alaya-blend-text");
    if (!option) { option = new Option(); option.className = "alaya-blend-text"; a.add(option, 0); }
    option.value = TEXT + text; option.textContent = `“${text}” (free text)`; option.title = text;
    a.value = option.value; this.$("alaya-blend").value = 0;
  },
  sendBlend() {
    const t = this.$("alaya-blend").value / 100;
    const spec = (value) => value.startsWith(TEXT) ? { text: value.slice(TEXT.length) } : { preset: value };
    const prompts = [{ ...spec(this.$("alaya-blend-a").value), weight: 1 - t },
                     { ...spec(this.$("alaya-blend-b").value), weight: t }].filter((p) => p.weight > 0);
    this.send({ type: "blend", prompts, mode: "linear", transition: 0 });
    this.boxAwaits = undefined;                         // superseded: it may never play
  },

  fillSources(sources, wanted) {
    const sel = this.$("alaya-source");
    sel.innerHTML = "";
    for (const s of sources) sel.add(new Option(s.title, s.id));
    if (![...sel.options].some((o) => o.value === wanted)) sel.add(new Option(wanted, wanted));
    this.source = wanted;
  },
  async upload(file) {
    this.say(`uploading ${file.name}…`, { ok: true, kind: "upload" });
    try {
      const res = await fetch(`/api/ui/uploads/${encodeURIComponent(file.name)}`, { method: "PUT", body: file,
                                                                                 headers: authorized() });
      const data = await res.json().catch(() => ({}));
      if (!res.ok) throw new Error(data.error || `upload failed: HTTP ${res.status}`);
      this.fillSources(await api("GET", "/api/ui/sources"), data.source);
      await this.connect(data.source);
      if (this.sessionId) {
        this.say(`uploaded ${data.source}: ${data.frames} frames, ${data.width}x${data.height}`,
                 { ok: true, kind: "upload" });
      }
    } catch (err) { this.say(err.message, { kind: "upload" }); }
  },
};
