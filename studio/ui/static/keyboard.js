// Keyboard access (docs/ui.md, "By keyboard"): every control is reached with Tab and does by keyboard what the
// mouse does. Enter or Space on the focused picture drives; focus leaving the picture hands the kart back; the
// file pickers are buttons that open their (hidden) file input; the timeline's blocks are one Tab stop whose
// arrows move the selection, S splits and Delete removes. Mixed into the Studio (studio.js).

const BLOCK_KEYS = { ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1 };

export const keyboard = {
  wireKeyboard() {
    this.video.addEventListener("keydown", (ev) => this.onPictureKey(ev));
    // Tab (or anything else) taking focus off the picture ends driving, as a click elsewhere does: the keys
    // typed next belong to the field that has focus, not to the kart. A window losing focus keeps it.
    this.video.addEventListener("blur", () => { if (this.driving && document.hasFocus()) this.drive(false); });
    for (const button of this.root.querySelectorAll("button[data-file]"))
      button.addEventListener("click", () => this.$(button.dataset.file).click());
    this.$("tl-lane").addEventListener("keydown", (ev) => this.onBlockKey(ev));
  },
  // Enter or Space on the focused picture: drive (the click's job), never a page scroll. In presenter mode
  // space keeps its hotkey (pause), and where nothing can be driven the keys do nothing.
  onPictureKey(ev) {
    if (this.driving || this.root.classList.contains("presenter")) return;
    if (ev.key !== "Enter" && ev.key !== " ") return;
    ev.preventDefault(); ev.stopPropagation();
    this.drive(true);
  },
  // A focused timeline block: arrows, Home and End select (and focus) another block, S splits the block (at the
  // playhead or in its middle, as the Split button), Delete and Backspace remove it (Delete also works page-wide).
  onBlockKey(ev) {
    if (!ev.target.classList.contains("tl-block") || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const tl = this.timeline, last = tl.segments.length - 1;
    let to = null;
    if (ev.key in BLOCK_KEYS) to = Math.max(0, Math.min(last, tl.selected + BLOCK_KEYS[ev.key]));
    else if (ev.key === "Home") to = 0;
    else if (ev.key === "End") to = last;
    else if (ev.key.toLowerCase() === "s") tl.split();
    else if (ev.key === "Delete" || ev.key === "Backspace") tl.remove();
    else return;
    ev.preventDefault(); ev.stopPropagation();        // handled here: no page scroll, no second Delete
    if (to !== null) tl.select(to);
    this.$("tl-lane").querySelector(".tl-block.selected")?.focus();
  },
};
