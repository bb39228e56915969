"""The studio page as a Gradio Blocks app: one HTML component holding the custom player, gallery, timeline,
stats and inspector (static/studio.html), brought to life by the page's own scripts (static/*.js)."""

from __future__ import annotations

from importlib.resources import files

import gradio as gr

STATIC_URL = "/ui/static"           # where mount_ui serves static/
ENTRY = "studio.js"                # an ES module: it imports the page's other modules (no build step)
# js_on_load runs when the component's markup is in the page; the modules may still be loading then.
START_JS = "const go = () => window.AlayaStudio ? window.AlayaStudio.start(element) : setTimeout(go, 30); go();"


def head_html() -> str:
    links = [f'<link rel="stylesheet" href="{STATIC_URL}/studio.css">',
             '<link rel="icon" href="/favicon.ico" type="image/svg+xml">']     # served by the studio server
    links.append(f'<script type="module" src="{STATIC_URL}/{ENTRY}"></script>')
    return "\n".join(links)


def build_blocks() -> gr.Blocks:
    markup = files("studio.ui").joinpath("static/studio.html").read_text(encoding="utf-8")
    with gr.Blocks(title="AlayaStudio", fill_width=True) as blocks:
        gr.HTML(markup, js_on_load=START_JS, apply_default_css=False, elem_id="alaya-root")
    return blocks
