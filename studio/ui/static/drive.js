// Drive mode: click the picture, then the keyboard steers the built-in engine's kart; Esc or a click elsewhere
// hands it back to the autopilot. Mixed into the Studio (studio.js).

const DRIVE_KEYS = { arrowleft: "left", a: "left", arrowright: "right", d: "right", arrowup: "up", w: "up",
                     arrowdown: "down", s: "down", " ": "space", r: "reset" };

const IDLE_HINT = "click the picture to drive · arrows/WASD · space brake · R reset · Esc release";
const DRIVING_HINT = "you drive · arrows/WASD steer · space brake · R reset · Esc or a click elsewhere: autopilot";

export const drive = {
  // Driving works on a live source only (the session's hello says `live`): elsewhere the hint is hidden and a
  // click on the picture does nothing, rather than enter a "you drive" mode whose first key is refused.
  setDrivable(on) {
    this.drivable = on;
    this.$("alaya-drive-hint").hidden = !on;
    if (!on) this.drive(false);
  },
  drive(on) {
    if (on && !this.drivable) return;
    if (on === this.driving) return;
    this.driving = on;
    this.$("alaya-stage").classList.toggle("driving", on);
    this.$("alaya-drive-hint").textContent = on ? DRIVING_HINT : IDLE_HINT;
    if (on) { this.video.focus(); return; }
    for (const key of this.held) this.send({ type: "key", key, down: false });
    this.held.clear();
    this.send({ type: "autopilot", on: true });       // released: the autopilot takes the wheel again
  },
  onDriveKey(ev, down) {
    const key = DRIVE_KEYS[ev.key.toLowerCase()];
    if (!key) return false;
    ev.preventDefault();
    if (down === this.held.has(key)) return true;      // auto-repeat
    down ? this.held.add(key) : this.held.delete(key);
    this.send({ type: "key", key, down });
    if (this.keyLog && this.keyLog.length < 1000) this.keyLog.push({ key, down, at: performance.timeOrigin + performance.now() });
    return true;
  },
};
