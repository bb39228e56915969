// Healing: when the session drops (a studio restart, the network, the studio's watchdog), the page asks
// /api/health with a growing pause until the studio answers, then starts a new session with the same owner key
// (api.js keeps it), the same source and the same timeline (connect() offers the page's timeline), and says in
// plain words what is happening. Mixed into the Studio (studio.js); player.js calls reconnectSoon and healed.

// 0.5, 1, 1, … s: a health check is cheap, and a presenter's picture must be back within seconds of the studio
const FIRST_TRY_MS = 500, LONGEST_WAIT_MS = 1000;
const HEALTH_TIMEOUT_MS = 2000;                    // a studio that accepts but does not answer counts as down

async function studioAnswers() {
  try {
    const res = await fetch("/api/health", { cache: "no-store", signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
    return res.ok;
  } catch { return false; }
}

export const heal = {
  // The session is gone: say so, clear what no longer holds (fps, status line), and start asking the studio.
  reconnectSoon() {
    if (this.healing) return;
    this.healing = { wait: FIRST_TRY_MS, tries: 0 };
    this.disconnect();
    this.overlay("reconnecting…");                    // no fps: the last one is stale
    this.$("alaya-status").textContent = "not connected: waiting for the studio";
    this.say("lost the studio (restarting?); reconnecting…", { kind: "session" });
    this.healSoon();
  },
  healSoon() {
    const healing = this.healing;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(async () => {
      if (this.healing !== healing) return;
      healing.tries += 1;
      if (await studioAnswers()) {
        if (this.healing !== healing) return;
        this.say("the studio answered; starting your session again…", { kind: "session" });
        this.overlay("the studio answered; reconnecting…");
        return this.connect(this.source);               // its hello calls healed(); a refused offer, healFailed()
      }
      healing.wait = Math.min(healing.wait * 2, LONGEST_WAIT_MS);
      this.say(`the studio is not answering (restarting?); trying again every ${healing.wait / 1000} s ` +
               `(${healing.tries} ${healing.tries === 1 ? "try" : "tries"} so far)`, { kind: "session" });
      this.healSoon();
    }, healing.wait);
  },
  // The new session's offer was refused (e.g. the studio is full while it starts): keep trying.
  healFailed() {
    if (!this.healing) return false;
    this.healSoon();
    return true;
  },
  // The new session said hello: the page is back.
  healed() {
    if (!this.healing) return;
    this.healing = null;
    this.say("back: a new session plays your source and your timeline", { ok: true, kind: "session" });
  },
};
