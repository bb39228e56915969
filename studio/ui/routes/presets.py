"""The preset gallery (tiles and their rendered thumbnails) and what a prompt box's text means: which presets the
reference renderer renders it as."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from prompt_presets import Conditioning, load_presets, resolve_prompt
from studio.ui.routes.deps import PNG, UIDep

router = APIRouter()


class PresetTile(BaseModel):
    name: str
    title: str
    color: str
    family: str
    thumbnail: str


@router.get("/presets", response_model=list[PresetTile])
def presets() -> list[PresetTile]:
    return [PresetTile(name=p.name, title=p.title, color=p.color, family=p.family,
                       thumbnail=f"/api/ui/presets/{p.name}/thumbnail.png") for p in load_presets().values()]


@router.get("/presets/{name}/thumbnail.png", response_class=Response, responses=PNG)
def thumbnail(name: str, ui: UIDep) -> Response:
    """Rendered by the reference renderer from a real engine frame; cached on disk after the first request."""
    png = ui.thumbnails.png(name)
    return Response(png, media_type="image/png", headers={"Cache-Control": "max-age=86400"})


class PromptMeaning(BaseModel):
    text: str
    preset: str | None = Field(description="the preset the text names (its name or an alias, any case), if any")
    maps_to: list[tuple[str, float]] = Field(description="(preset, weight) the reference renderer renders it as")


@router.get("/prompt", response_model=PromptMeaning)
def prompt_meaning(text: str = Query(min_length=1, max_length=2000)) -> PromptMeaning:
    """What a prompt box's text means, by the one resolver every box uses (`prompt_presets.resolve_prompt`)."""
    from renderer.reference.style import prompt_blend

    prompt = resolve_prompt(text)
    blend = sorted(prompt_blend(Conditioning((prompt,))), key=lambda nw: -nw[1])
    return PromptMeaning(text=text, preset=prompt.preset, maps_to=[(n, round(w, 3)) for n, w in blend])
