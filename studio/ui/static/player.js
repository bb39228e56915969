// The player: the session's WebRTC peer connection, its data channel (docs/datachannel.md) and what the
// server reports on it. Mixed into the Studio (studio.js): `this` is the page.
import { api, setOwnerKey } from "./api.js";
import { refusal } from "./words.js";

const ICE_GATHER_MS = 3000;
const SWITCHES = ["prompt", "preset", "blend", "switch"];
// the message kind (studio.js `say`) of a data-channel request: its error clears when the same kind succeeds
const messageKind = (request) => SWITCHES.includes(request) ? "prompt" :
  ["schedule", "seek", "loop"].includes(request) ? "timeline" : "session";

// The one place the page builds a peer connection: with the studio's STUN/TURN servers (never hard-coded here),
// and a watch on ICE that says which server failed and what to check.
export async function newPeerConnection(say) {
  const { iceConfiguration, watchIce } = await import("/webrtc/ice.js");
  const ice = await iceConfiguration();
  const pc = new RTCPeerConnection(ice);
  return { pc, iceWatch: watchIce(pc, ice, say) };
}

async function gatherIce(pc) {
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise((done) => {
    if (pc.iceGatheringState === "complete") return done();
    const t = setTimeout(done, ICE_GATHER_MS);
    pc.addEventListener("icegatheringstatechange", () => {
      if (pc.iceGatheringState === "complete") { clearTimeout(t); done(); }
    });
  });
}

// The frame's prompts as the overlay shows them: whole (the server's `label` cuts free text at 32 characters;
// the overlay's CSS ellipsis cuts what does not fit, and its title shows all).
function promptLabel(m) {
  const names = (m.prompts || []).map((p) => p.preset || p.text);
  if (!names.length) return m.label;
  return names.length === 1 ? names[0] : names.map((n, k) => `${n} ${m.prompts[k].weight.toFixed(2)}`).join(" + ");
}

export const player = {
  async connect(source) {
    this.disconnect();
    if (source.startsWith("take:") && this.connectedSource !== source) await this.takeTimeline(source);
    else if (this.connectedSource !== undefined && this.connectedSource !== source) this.freshTimeline();
    if (this.connectedSource !== source) this.clearTakeLine();
    this.connectedSource = source;
    this.source = source; this.$("alaya-source").value = source;
    this.timeline.extent = 0; this.timeline.playhead = 0;
    const { pc, iceWatch } = await newPeerConnection((msg) => { if (pc === this.pc) this.say(msg); });
    this.pc = pc;
    pc.addTransceiver("video", { direction: "recvonly" });
    const channel = pc.createDataChannel("control"); this.channel = channel;
    // a closed session's last messages can still arrive: only the current session's count
    channel.onmessage = (ev) => { if (pc === this.pc) this.onMessage(JSON.parse(ev.data)); };
    // The studio closes the channel when it ends the session; unless the sequence simply ended, start a new
    // session on the same source with the same timeline once the studio answers (heal.js), so a presenter's
    // screen never stays dead.
    channel.onclose = () => { if (pc === this.pc && !this.sourceEnded) this.reconnectSoon(); };
    pc.addEventListener("connectionstatechange", () => {
      if (pc === this.pc && pc.connectionState === "failed") this.reconnectSoon();
    });
    pc.ontrack = (ev) => {
      // play frames as they come: the studio paces them itself, so the browser's jitter buffer only adds
      // delay (?playout=browser keeps the browser's own choice, for comparison)
      if (this.playout !== "browser") {
        if ("jitterBufferTarget" in ev.receiver) ev.receiver.jitterBufferTarget = 0;
        else if ("playoutDelayHint" in ev.receiver) ev.receiver.playoutDelayHint = 0;
      }
      this.video.srcObject = ev.streams[0] || new MediaStream([ev.track]);
      this.video.play().catch(() => {});
    };
    await gatherIce(pc);
    const iceProblem = iceWatch.problem();
    if (iceProblem) { this.say(iceProblem); this.overlay("ICE failed"); return; }
    this.overlay("connecting…");
    try {
      const answer = await api("POST", "/api/webrtc/offer", { sdp: pc.localDescription.sdp, type: "offer", source,
        schedule: this.timeline.doc, size: this.size });
      if (pc !== this.pc) return;
      this.sessionId = answer.session_id;
      if (answer.owner_key) setOwnerKey(answer.owner_key);
      await pc.setRemoteDescription({ sdp: answer.sdp, type: answer.type });
      this.succeeded("source");
    } catch (err) {
      if (pc !== this.pc) return;
      this.disconnect();
      if (this.healFailed()) return;                    // reconnecting after a drop: keep trying
      this.say(err.message, { kind: "source" }); this.overlay("not connected");
    }
  },
  disconnect() {
    if (this.pc) this.pc.close();
    this.pc = null; this.channel = null; this.sessionId = null; this.hello = null; this.sourceEnded = false;
    this.pendingSchedules = 0; this.setPaused(false); this.setRecording(false); this.setDrivable(false);
  },
  send(msg) {
    if (!this.channel || this.channel.readyState !== "open") return false;
    this.channel.send(JSON.stringify(this.quantized(msg)));
    this.noteSwitchSent(msg);
    if (msg.type === "schedule") this.pendingSchedules += 1;
    return true;
  },

  onMessage(m) {
    switch (m.type) {
      case "hello":
        this.hello = m; this.timeline.setSource(m.recorded ? m.frames : null); this.setDrivable(!!m.live);
        if (this.measuring) this.measure();              // a new session: stamp again
        this.reportedDelay = null;                      // and tell it the screen delay again
        this.resetSwitches(); this.healed(); this.showShare();
        break;
      case "status": this.noteRendered(m); this.onStatus(m); break;
      case "pong": this.onPong(m); break;
      case "ack":
        this.succeeded(messageKind(m.request));
        if (SWITCHES.includes(m.request)) {
          this.preparing = null; this.pullSchedule();
          this.timeline.note(this.switchNote(m));
        }
        if (m.request === "schedule") this.scheduleSettled();
        if (m.request === "pause" || m.request === "play") this.setPaused(m.request === "pause");
        if (m.request === "take") this.setRecording(m.action === "start");
        break;
      case "take": if (m.state === "stopped") this.onTakeStopped(m); break;
      case "preparing":             // free text waits for the text-matching model; frames keep coming
        this.preparing = m.label;
        this.say(`preparing prompt… (${m.label})`, { ok: true, kind: "prompt" });
        break;
      case "timeline": this.pullSchedule(); break;     // the session moved on, e.g. the next pass of a loop
      case "stats": this.onStats(m); break;
      case "error":
        this.say(refusal(m), { kind: messageKind(m.request) });
        if (m.request === "schedule") this.scheduleSettled();
        if (m.request === "prompt") this.boxRefused();
        break;
      case "ended":
        this.sourceEnded = m.reason === "the source ended";
        this.say(`stream ended at frame ${m.frame}: ${m.reason}`, { kind: "session" });
        break;
    }
  },

  onStatus(m) {
    this.noteSwitchStatus(m.label);       // before lastStatus moves on: a switch is judged against the label before
    this.lastStatus = m;
    if (this.recording) this.onTakeStatus(m.take);
    const doc = this.timeline.doc;
    // on a loop the overlay and the timeline both count frames within the loop, and say which pass it is
    const looping = doc.loop && doc.length, at = looping ? m.frame % doc.length : m.frame;
    const pass = looping ? ` · pass ${Math.floor(m.frame / doc.length) + 1}` : "";
    const label = promptLabel(m);
    this.overlay(this.preparing ? `${label} · preparing ${this.preparing}…` : label, `frame ${at}${pass}`,
                 `${m.fps.toFixed(1)} fps`);
    this.$("alaya-status").textContent =
      `session ${this.sessionId} · ${this.source} · frame ${m.frame} · ${m.fps.toFixed(1)}/${m.target_fps} fps` +
      ` · render → send ${m.latency_ms} ms${m.slow ? " · renderer slower than real time" : ""}\n${this.statsLine || ""}`;
    this.timeline.setPlayhead(at);
    this.$("tl-now").textContent = `· now frame ${at}${pass}, block #${this.timeline.blockAt(at)}`;
    const top = [...m.prompts].sort((a, b) => b.weight - a.weight)[0];
    this.markActive(top && top.preset, m.prompts.length === 1);
    this.followPlaying(m.prompts);
    this.chartStatus(m);
  },
};
