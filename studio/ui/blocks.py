"""The studio page as a Gradio Blocks app: one HTML component holding the custom player, gallery, timeline,
stats and inspector (static/studio.html), brought to life by the page's own scripts (static/*.js)."""

from __future__ import annotations

from importlib.resources import files

import gradio as gr

STATIC_URL = "/ui/static"           # where mount_ui serves static/
ENTRY = "studio.js"                # an ES module: it imports the page's other modules (no build step)
# js_on_load runs when the component's markup is in the page; the modules may still be loading then.
START_JS = "const go = () => window.AlayaStudio ? window.AlayaStudio.start(element) : setTimeout(go, 30); go();"


PAGE_BACKGROUND, PAGE_TEXT = "#15171c", "#e6e6e6"     # studio.css's --bg and --fg


def page_theme() -> gr.themes.Base:
    """Gradio's theme with the page's dark body. Gradio writes the body colours into an inline <style> of the
    HTML it serves, so the very first paint (its "Loading…" screen, before any CSS or script has arrived) is
    already dark instead of a white flash."""
    dark = {"body_background_fill": PAGE_BACKGROUND, "body_background_fill_dark": PAGE_BACKGROUND,
            "body_text_color": PAGE_TEXT, "body_text_color_dark": PAGE_TEXT}
    return gr.themes.Default().set(**dark)


def head_html() -> str:
    links = ['<meta name="color-scheme" content="dark">',      # dark form controls and scrollbars
             f'<link rel="stylesheet" href="{STATIC_URL}/studio.css">',
             '<link rel="icon" href="/favicon.ico" type="image/svg+xml">']     # served by the studio server
    links.append(f'<script type="module" src="{STATIC_URL}/{ENTRY}"></script>')
    return "\n".join(links)


def build_blocks() -> gr.Blocks:
    markup = files("studio.ui").joinpath("static/studio.html").read_text(encoding="utf-8")
    # analytics off: the studio must phone nowhere (issue 42, finding 11)
    with gr.Blocks(title="AlayaStudio", fill_width=True, analytics_enabled=False) as blocks:
        gr.HTML(markup, js_on_load=START_JS, apply_default_css=False, elem_id="alaya-root")
    return blocks
