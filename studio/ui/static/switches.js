// Switch → screen latency in the page (issue 44, docs/ui.md#switch--screen): from a style switch leaving the page
// (a tile, the prompt box, the blend, a hotkey) to the first frame in the new style. Mixed into the Studio.
//
// Every frame's status names the conditioning it was rendered with (its label), so the first frame of the new
// style is the first one whose label differs from the label playing when the switch was sent. While "measure" is
// on, the picture's stamp says which frame is on screen (latency.js), and the figure ends when that frame is shown
// ("switch → screen"). Off, it ends when the frame's status arrives, as the frame leaves the studio's pacing for
// the encoder ("switch → sent"): the screen is a few milliseconds later, and the line says which it is.

const KEPT = 200;
export const SWITCH_TYPES = new Set(["prompt", "preset", "blend"]);   // what a style switch is sent as
const wallNow = () => performance.timeOrigin + performance.now();

export const switches = {
  buildSwitches() {
    this.switchPending = null;            // {at (page wall ms), before (the label then)} until its frame shows
    this.switchLog = [];                  // {ms, screen, at} of the session's switches, newest last
  },
  noteSwitchSent(msg) {
    if (!SWITCH_TYPES.has(msg.type)) return;
    this.switchPending = { at: wallNow(), before: this.lastStatus ? this.lastStatus.label : null };
  },
  // a status arrived (`label` rendered, sent now); without the stamp this is where the figure ends
  noteSwitchStatus(label) {
    if (!this.measuring) this.switchLanded(label, wallNow(), false);
  },
  // a stamped frame is on screen at `shown` (page wall ms)
  noteSwitchPresented(label, shown) { this.switchLanded(label, shown, true); },
  switchLanded(label, at, screen) {
    const pending = this.switchPending;
    if (!pending || label === undefined || label === pending.before || at < pending.at) return;
    this.switchPending = null;
    this.switchLog.push({ ms: at - pending.at, screen, at });        // at: page wall ms it landed
    if (this.switchLog.length > KEPT) this.switchLog.shift();
    const same = this.switchLog.filter((s) => s.screen === screen).map((s) => s.ms).sort((a, b) => a - b);
    const p95 = same[Math.min(same.length - 1, Math.floor(0.95 * same.length))];
    const what = screen ? "switch → screen" : "switch → sent";
    this.$("alaya-switch").textContent = `${what} ${Math.round(at - pending.at)} ms · p95 ${Math.round(p95)} ms ` +
      `over ${same.length} switch${same.length === 1 ? "" : "es"}` + (screen ? "" : " (measure for the screen)");
    this.switchNow = { ms: at - pending.at, p95, switches: same.length, screen };
  },
  resetSwitches() {
    this.switchPending = null; this.switchLog = [];
    this.$("alaya-switch").textContent = "";
  },
};
