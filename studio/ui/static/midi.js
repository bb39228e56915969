// MIDI in the page (docs/presenting.md#midi): Web MIDI, no server dependency. Mixed into the Studio.
//
// MIDI learn: press "MIDI learn", click a target (a style tile, the blend fader, the transition field or Pause),
// then move a control or press a key: the control is mapped to it. Notes switch presets; a CC drives the blend
// weight or the transition length; any note or CC can toggle play/pause. MIDI clock (24 ticks a quarter note)
// sets the tempo, and Start is a downbeat. Mappings are kept in this browser (localStorage) and can be exported
// and imported as JSON. Every input reaches `onMidi` through one EventTarget (`midiBus`), from the real ports and
// from tests' synthetic MIDIMessageEvents alike.

const STORE = "alaya-midi", TARGETS = new Set(["preset", "blend", "transition", "pause"]);
const CLOCK = 0xf8, START = 0xfa, TICKS_PER_BEAT = 24, CLOCK_BEATS = 4, MAX_TRANSITION = 480;

const keyOf = (status, data1) => {
  const kind = status & 0xf0;
  if (kind === 0x90 || kind === 0x80) return `note:${status & 0x0f}:${data1}`;
  if (kind === 0xb0) return `cc:${status & 0x0f}:${data1}`;
  return null;
};

export const midi = {
  buildMidi() {
    this.midiBus = new EventTarget();
    this.midiBus.addEventListener("midimessage", (ev) => this.onMidi(ev.data, ev.timeStamp));
    this.midiMap = this.loadMidiMap();
    this.midiLearn = null;                 // "armed" (waiting for a target), then {target, preset?}
    this.midiTicks = [];
    this.$("alaya-midi-learn").addEventListener("click", () => this.armMidiLearn());
    this.$("alaya-midi-export").addEventListener("click", () => this.exportMidi());
    this.$("alaya-midi-import").addEventListener("change", (ev) => this.importMidi(ev.target.files[0]));
    // a click on a target while learning picks it (capture: before the tile switches style)
    this.root.addEventListener("click", (ev) => this.pickMidiTarget(ev), true);
    if (navigator.requestMIDIAccess) {
      navigator.requestMIDIAccess().then((access) => {
        const attach = () => access.inputs.forEach((input) => {
          input.onmidimessage = (ev) => this.midiBus.dispatchEvent(new MIDIMessageEvent("midimessage", { data: ev.data }));
        });
        attach(); access.onstatechange = attach;
      }).catch(() => {});                  // no permission or no MIDI: the page works without it
    }
    this.showMidi();
  },
  loadMidiMap() {
    try { return this.checkMidiMap(JSON.parse(localStorage.getItem(STORE) || "{}")); } catch { return {}; }
  },
  // a mapping file: {"note:0:60": {"target": "preset", "preset": "volcano"}, "cc:0:1": {"target": "blend"}, …}
  checkMidiMap(map) {
    if (!map || typeof map !== "object" || Array.isArray(map)) throw new Error("it is not a JSON object");
    for (const [key, value] of Object.entries(map)) {
      if (!/^(note|cc):\d{1,2}:\d{1,3}$/.test(key)) throw new Error(`${key} is not note:CHANNEL:N or cc:CHANNEL:N`);
      if (!value || !TARGETS.has(value.target)) throw new Error(`${key}: target must be preset, blend, transition or pause`);
      if (value.target === "preset" && !this.presets.some((p) => p.name === value.preset))
        throw new Error(`${key}: no preset ${JSON.stringify(value.preset)}`);
    }
    return map;
  },
  saveMidiMap() { localStorage.setItem(STORE, JSON.stringify(this.midiMap)); this.showMidi(); },
  showMidi() {
    const n = Object.keys(this.midiMap).length;
    this.$("alaya-midi-state").textContent = this.midiLearn === "armed" ? "click a tile, the blend, the transition or Pause"
      : this.midiLearn ? `move a control for ${this.midiLearn.preset || this.midiLearn.target}` : `${n} mapped`;
  },
  armMidiLearn() { this.midiLearn = "armed"; this.showMidi(); },
  pickMidiTarget(ev) {
    if (this.midiLearn !== "armed") return;
    const tile = ev.target.closest(".alaya-tile"), id = ev.target.id;
    const target = tile ? { target: "preset", preset: tile.dataset.preset }
      : id === "alaya-blend" ? { target: "blend" } : id === "alaya-transition" ? { target: "transition" }
      : id === "alaya-pause" ? { target: "pause" } : null;
    if (!target) return;
    ev.preventDefault(); ev.stopPropagation();
    this.midiLearn = target; this.showMidi();
  },
  // `at`: when it arrived (ms, the page's clock); the clock's tempo is measured between arrivals
  onMidi(data, at = performance.now()) {
    if (!data || !data.length) return;
    const status = data[0];
    if (status === CLOCK) return this.midiClock(at);
    if (status === START) { this.midiTicks = []; return this.send({ type: "beat", downbeat: true }); }
    if (data.length < 3 || data[1] > 127 || data[2] > 127) {
      this.say(`MIDI: a ${data.length}-byte message [${[...data].join(", ")}] is not a note or a control change`,
               { kind: "midi" });
      return;
    }
    const key = keyOf(status, data[1]), kind = status & 0xf0;
    if (!key) return;                      // aftertouch, pitch bend, …: not mapped
    if (this.midiLearn && this.midiLearn !== "armed") {
      this.midiMap[key] = this.midiLearn; this.midiLearn = null; this.saveMidiMap();
      this.say(`MIDI ${key} → ${this.midiMap[key].preset || this.midiMap[key].target}`, { ok: true, kind: "midi" });
      return;
    }
    const map = this.midiMap[key];
    const pressed = kind === 0xb0 || (kind === 0x90 && data[2] > 0);
    if (!map || !pressed && map.target !== "blend" && map.target !== "transition") return;
    if (map.target === "preset") this.setPreset(map.preset);
    else if (map.target === "pause") this.togglePause();
    else if (map.target === "blend") { this.$("alaya-blend").value = Math.round(data[2] / 127 * 100); this.sendBlend(); }
    else if (map.target === "transition") this.$("alaya-transition").value = Math.round(data[2] / 127 * MAX_TRANSITION);
  },
  // MIDI clock: the tempo from the last beat's ticks, sent when it moves by a BPM or more
  midiClock(at) {
    this.midiTicks.push(at);
    if (this.midiTicks.length > TICKS_PER_BEAT * CLOCK_BEATS + 1) this.midiTicks.shift();
    if (this.midiTicks.length < TICKS_PER_BEAT + 1) return;
    const span = this.midiTicks[this.midiTicks.length - 1] - this.midiTicks[0];
    const bpm = 60000 / (span / ((this.midiTicks.length - 1) / TICKS_PER_BEAT));
    if (!this.midiBpm || Math.abs(bpm - this.midiBpm) >= 1) { this.midiBpm = bpm; this.setTempo(bpm); }
  },
  exportMidi() {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([JSON.stringify(this.midiMap, null, 2)], { type: "application/json" }));
    a.download = "alaya-midi.json"; a.click();
  },
  async importMidi(file) {
    if (!file) return;
    try {
      this.midiMap = this.checkMidiMap(JSON.parse(await file.text()));
      this.saveMidiMap();
      this.say(`MIDI: ${Object.keys(this.midiMap).length} mappings imported`, { ok: true, kind: "midi" });
    } catch (err) { this.say(`MIDI mappings ${file.name}: ${err.message}`, { kind: "midi" }); }
  },
};
