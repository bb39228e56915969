// The page's layout where CSS alone cannot say it (docs/ui.md, "Layout"): the picture's largest size and aspect
// come from the stream itself, and the gallery's columns are balanced so that no row is left with a tile or two.
// Mixed into the Studio (studio.js).

const BASE_WIDTH = 640;        // the page's picture for small streams (320×176 and 416×224 are shown this wide)
const TILE_MIN = 118, GAP = 8;  // a gallery tile's least width and the grid's gap (studio.css)

export const layout = {
  buildLayout() {
    // the video's own size is the stream's native size: known at its first frame, new with each new stream
    this.video.addEventListener("resize", () => this.fitPicture(this.video.videoWidth, this.video.videoHeight));
    const gallery = this.$("alaya-gallery");
    new ResizeObserver(() => this.balanceGallery()).observe(gallery);
    this.balanceGallery();
  },
  // The picture grows with the window up to the stream's native width (never under BASE_WIDTH), its aspect kept.
  fitPicture(width, height) {
    if (!width || !height) return;
    const style = this.root.style;
    style.setProperty("--picture-max", `${Math.max(BASE_WIDTH, width)}px`);
    style.setProperty("--picture-aspect", `${width} / ${height}`);
    style.setProperty("--picture-ratio", String(width / height));
  },
  // The fewest rows the width allows, the tiles spread evenly over them (16 presets at 1920 wide: two rows of 8,
  // not 14 and an orphan 2); fewer columns still where the last row would hold under half a row.
  balanceGallery() {
    const box = this.$("alaya-gallery"), n = box.children.length, width = box.clientWidth;
    if (!n || !width) return;
    const fit = Math.max(1, Math.floor((width + GAP) / (TILE_MIN + GAP)));
    let columns = Math.ceil(n / Math.ceil(n / fit));
    while (columns > 1 && 2 * (n - (Math.ceil(n / columns) - 1) * columns) < columns) columns -= 1;
    const template = `repeat(${columns}, minmax(0, 1fr))`;
    if (box.style.gridTemplateColumns !== template) box.style.gridTemplateColumns = template;
  },
};
