// The page's number fields take their limits from the studio (GET /api/ui/config `limits`): the very constants
// the server validates those values with, so a field never offers what the studio refuses and a refusal never
// quotes a limit the field does not show (docs/ui.md, "Messages"). Mixed into the Studio (studio.js).

const LIMITED = {                        // field → its limit's name in `limits`
  "alaya-transition": "switch_transition_frames",    // a live switch's blend (webrtc/protocol.py)
  "tl-seg-frames": "block_transition_frames",        // a timeline block's transition (timeline/schedule/model.py)
  "tl-render-frames": "render_frames",               // Render to MP4 (studio/ui/jobs.py)
};

export const fields = {
  applyLimits() {
    for (const [id, name] of Object.entries(LIMITED)) {
      const max = this.config.limits?.[name];
      if (max != null) this.$(id).max = max;
    }
  },
};
