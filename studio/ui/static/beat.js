// The show's tempo in the page (docs/presenting.md#on-the-beat): a BPM field, tap tempo (the Tap button or T in
// presenter mode) and quantize (off / beat / bar). Mixed into the Studio.
//
// The tempo lives in the session (a `tempo` message, a downbeat now; MIDI clock sets it too, midi.js); with
// quantize on, every switch the page sends carries `quantize`, and the studio places it on the frame it sends on
// the next beat or bar, ahead of time.

import { SWITCH_TYPES } from "./switches.js";

const TAPS_KEPT = 8, TAP_GAP_MS = 2000, MIN_BPM = 20, MAX_BPM = 300;

export const beat = {
  buildBeat() {
    this.taps = [];
    this.quantize = null;
    this.$("alaya-bpm").addEventListener("change", (ev) => this.setTempo(ev.target.value));
    this.$("alaya-tap").addEventListener("click", () => this.tap());
    this.$("alaya-quantize").addEventListener("change", (ev) => {
      this.quantize = ev.target.value === "off" ? null : ev.target.value;
      if (this.quantize) this.watchFrames();          // the screen delay its switches are placed ahead by
    });
  },
  // a bad BPM is one line, and nothing is sent
  setTempo(value) {
    const bpm = Number(value);
    if (value === "" || value === null) return this.send({ type: "tempo", bpm: null });
    if (!Number.isFinite(bpm) || bpm < MIN_BPM || bpm > MAX_BPM) {
      this.say(`tempo: ${value} is not a BPM between ${MIN_BPM} and ${MAX_BPM}`, { kind: "tempo" });
      return false;
    }
    this.$("alaya-bpm").value = Math.round(bpm * 10) / 10;
    return this.send({ type: "tempo", bpm });
  },
  // Tap tempo: the median gap of the recent taps; a pause of two seconds starts counting again.
  tap(at = performance.now()) {
    if (this.taps.length && at - this.taps[this.taps.length - 1] > TAP_GAP_MS) this.taps = [];
    this.taps.push(at);
    if (this.taps.length > TAPS_KEPT) this.taps.shift();
    if (this.taps.length < 2) return;
    const gaps = this.taps.slice(1).map((t, i) => t - this.taps[i]).sort((a, b) => a - b);
    this.setTempo(60000 / gaps[Math.floor(gaps.length / 2)]);
  },
  // player.send calls this for every message: a switch takes the page's quantize
  quantized(msg) {
    if (this.quantize && SWITCH_TYPES.has(msg.type) && msg.quantize === undefined) msg.quantize = this.quantize;
    return msg;
  },
};
