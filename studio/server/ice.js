// ICE for the studio's pages (ES module, /webrtc/ice.js). The RTCConfiguration comes from the studio
// (GET /api/webrtc/ice: the servers of `alaya-studio serve --ice-server ...`), never from the page, and ICE
// trouble becomes one clear message instead of an endless spinner.

export async function iceConfiguration() {
  const res = await fetch("/api/webrtc/ice");
  if (!res.ok) throw new Error(`GET /api/webrtc/ice: HTTP ${res.status}`);
  return res.json();
}

const turnUrls = (config) =>
  config.iceServers.flatMap((s) => [].concat(s.urls)).filter((u) => u.startsWith("turn"));

// Watches `pc` (built with `config`); `onFailure(message)` is called when ICE fails or stops working.
// Returns { problem() }: after gathering, the message if relay is required and no relay address came.
export function watchIce(pc, config, onFailure) {
  const errors = [];
  pc.addEventListener("icecandidateerror", (ev) => {
    if (ev.url) errors.push(`${ev.url} answered ${ev.errorCode}${ev.errorText ? " " + ev.errorText : ""}`);
  });
  const message = (what) => {
    const turn = turnUrls(config);
    return `ICE failed: ${what}` + (turn.length ? ` (TURN server ${turn.join(", ")})` : "") +
      (errors.length ? `: ${errors.slice(-2).join("; ")}` : "") +
      (turn.length ? ". Check that the TURN server is running and reachable from here and that the studio's " +
       "--turn-user/--turn-password or --turn-secret match its configuration."
       : ". This network may need a TURN server (alaya-studio serve --ice-server turn:... ; see docs/deploy.md).");
  };
  pc.addEventListener("iceconnectionstatechange", () => {
    if (pc.iceConnectionState === "failed") onFailure(message("the connection could not be made or was lost"));
    else if (pc.iceConnectionState === "disconnected") onFailure(message("the connection was interrupted"));
  });
  return {
    problem() {
      const sdp = pc.localDescription ? pc.localDescription.sdp : "";
      return config.iceTransportPolicy === "relay" && !/ typ relay /.test(sdp) ? message("no relay address") : null;
    },
  };
}
