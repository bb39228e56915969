// Timeline zoom: the lane drawn wider than its panel, which then scrolls sideways, so blocks of a few frames (a
// take's steps, a Parseq fade) are wide enough to read, label and grab. The + and − buttons, Ctrl (or Alt) + the
// wheel over the timeline, and the + − 0 keys while the timeline has the focus; 0 (or Fit) shows it all again.
export const MAX_ZOOM = 64;          // × the panel's width: a 683-frame view at 1000 px gets ~94 px a frame

export function zoomable(tl, { zoomIn, zoomOut, fit, level }) {
  const root = tl.root;
  const visible = (x) => x >= root.scrollLeft && x <= root.scrollLeft + root.clientWidth;
  const show = () => {
    level.textContent = `${tl.zoom}×`;
    zoomOut.disabled = fit.disabled = tl.zoom <= 1; zoomIn.disabled = tl.zoom >= MAX_ZOOM;
    root.classList.toggle("zoomed", tl.zoom > 1);
  };
  // The frame under the pointer stays under it (a button: the playhead, when on screen, else the view's middle).
  const zoomTo = (zoom, clientX) => {
    zoom = Math.max(1, Math.min(MAX_ZOOM, zoom));
    if (zoom === tl.zoom) return;
    const px = clientX != null ? clientX - root.getBoundingClientRect().left - root.clientLeft
      : visible(tl.x(tl.playhead)) ? tl.x(tl.playhead) - root.scrollLeft : root.clientWidth / 2;
    const frame = ((root.scrollLeft + px) / tl.width) * tl.viewFrames;
    tl.zoom = zoom; show(); tl.render();
    root.scrollLeft = tl.x(frame) - px;
  };
  tl.zoomTo = zoomTo;
  zoomIn.addEventListener("click", () => zoomTo(tl.zoom * 2));
  zoomOut.addEventListener("click", () => zoomTo(tl.zoom / 2));
  fit.addEventListener("click", () => zoomTo(1));
  root.addEventListener("wheel", (ev) => {
    if (!(ev.ctrlKey || ev.metaKey || ev.altKey) || !ev.deltaY) return;   // a plain wheel scrolls the page
    ev.preventDefault();                                                 // not the browser's page zoom
    zoomTo(tl.zoom * (ev.deltaY < 0 ? 2 : 0.5), ev.clientX);
  }, { passive: false });
  root.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const zoom = { "+": tl.zoom * 2, "=": tl.zoom * 2, "-": tl.zoom / 2, "0": 1 }[ev.key];
    if (zoom === undefined) return;
    ev.preventDefault(); ev.stopPropagation();
    zoomTo(zoom);
  });
  // zoomed in, the view follows the playhead while the visitor watches it (not while they look elsewhere)
  const setPlayhead = tl.setPlayhead.bind(tl);
  tl.setPlayhead = (frame) => {
    const watched = tl.zoom > 1 && visible(tl.x(tl.playhead));
    setPlayhead(frame);
    const x = tl.x(tl.playhead);
    if (watched && !visible(x)) root.scrollLeft = x - root.clientWidth * 0.1;
  };
  show();
}
