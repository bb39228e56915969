// Share: the audience's link to this show. The owner's hello carries `watch` (the session's watch key and its
// page, studio/server/audience.py); the Share… button shows the whole link, copies it, and draws it as a QR
// code for a room. The link is the session's: a new session (a reload, a restart, another source) has a new
// one, and the panel says so. Mixed into the Studio (studio.js); player.js calls showShare on each hello.
import { drawQr } from "./qr.js";

const COPIED_MS = 3000;

export const share = {
  wireShare() {
    this.$("alaya-share").addEventListener("click", () => this.toggleShare());
    this.$("alaya-share-copy").addEventListener("click", () => this.copyShare());
    this.$("alaya-share-link").addEventListener("focus", (ev) => ev.target.select());
  },
  watchLink() {
    const page = this.hello?.watch?.page;
    return page ? new URL(page, location.origin).href : null;
  },
  toggleShare(open = this.$("alaya-share-panel").hidden) {
    this.$("alaya-share-panel").hidden = !open;
    this.$("alaya-share").setAttribute("aria-expanded", String(open));
    if (open) this.showShare();
  },
  // On each hello (a new session: its link is new) and when the panel opens.
  showShare() {
    const link = this.watchLink(), field = this.$("alaya-share-link"), note = this.$("alaya-share-note");
    const changed = this.sharedLink && link && link !== this.sharedLink;
    if (link) this.sharedLink = link;
    field.value = link || "";
    this.$("alaya-share-copy").disabled = !link;
    if (this.$("alaya-share-panel").hidden) return;
    drawQr(this.$("alaya-share-qr"), link);
    note.textContent = !link ? "no link yet: the session has not started" :
      (changed ? "a new session, so a new link: the old one shows its audience that the show is over. " : "") +
      `Anyone with this link watches this session, read-only (at most ${this.hello.watch.max_watchers} at once), ` +
      "until it ends; a reload or a studio restart starts a new session with a new link.";
  },
  async copyShare() {
    const link = this.watchLink();
    if (!link) return;
    let copied = false;
    try { await navigator.clipboard.writeText(link); copied = true; } catch { /* not a secure page: below */ }
    if (!copied) {                  // http:// on another machine has no clipboard API: the selection's copy
      const field = this.$("alaya-share-link");
      field.focus(); field.select();
      copied = document.execCommand && document.execCommand("copy");
    }
    const button = this.$("alaya-share-copy");
    button.textContent = copied ? "Copied" : "Select and copy it";
    setTimeout(() => { button.textContent = "Copy"; }, COPIED_MS);
  },
};
