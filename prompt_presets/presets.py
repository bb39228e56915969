"""The style presets: loaded from the JSON data files in `prompt_presets/data/`, validated at load.

A data file is `{"version": 1, "presets": [{name, title, family, color, keywords, aliases, prompt, reference}, ...]}`;
`aliases` are other names for the preset ('lava' → volcano), matched like names.
Presets are ordered by family (the report's "flash" styles, then the original "alayarenderer" list), then by
their position in the file. See docs/presets.md.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from alaya_errors import one_line
from prompt_presets.conditioning import ConditioningError
from prompt_presets.reference_params import ReferenceParams

DATA_DIR = Path(__file__).resolve().parent / "data"
FAMILIES = ("flash", "alayarenderer")
# The order the report's 637-frame demo cycles through.
REPORT_STYLES = ("cyberpunk", "volcano", "sandstorm", "polar", "vaporwave", "holy_gold", "deep_sea", "infrared")
ORIGINAL_STYLES = ("original", "bright_sunny", "snowy_winter", "sunset_dramatic", "cyberpunk_neon",
                   "underwater", "autumn_warm", "moonlit_night")

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_COLOR_RE = re.compile(r"^#[0-9a-fA-F]{6}$")


class PresetError(ConditioningError):
    """An unknown preset name or a malformed preset data file."""


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("missing or empty text")
    return value.strip()


Text = Annotated[str, BeforeValidator(_text)]


class Preset(BaseModel):
    """One style, as written in a data file (the file's schema is this model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Text = Field(description="short id, snake_case: what schedules and the API use")
    title: Text = Field(description="what the UI shows")
    prompt: Text = Field(description="the full paragraph a neural renderer receives")
    color: Text = Field(description='thumbnail colour, "#rrggbb"')
    family: Text = Field(description='"flash" (the report\'s styles) or "alayarenderer" (the original list)')
    reference: ReferenceParams = ReferenceParams()
    # for matching free text when no sentence-embedding model is available
    keywords: tuple[str, ...] = ()
    aliases: tuple[str, ...] = Field((), description="other names, matched like names ('lava' for volcano)")

    @field_validator("name")
    @classmethod
    def _snake_case(cls, name: str) -> str:
        if not _NAME_RE.match(name):
            raise ValueError(f"name {name!r} must be snake_case (a-z, 0-9, _)")
        return name

    @field_validator("color")
    @classmethod
    def _rrggbb(cls, color: str) -> str:
        if not _COLOR_RE.match(color):
            raise ValueError(f"color {color!r} is not '#rrggbb'")
        return color.lower()

    @field_validator("family")
    @classmethod
    def _known_family(cls, family: str) -> str:
        if family not in FAMILIES:
            raise ValueError(f"family {family!r} is not one of {', '.join(FAMILIES)}")
        return family

    @field_validator("keywords", mode="before")
    @classmethod
    def _keyword_list(cls, keywords: Any) -> tuple[str, ...]:
        if not isinstance(keywords, list) or not all(isinstance(k, str) and k.strip() for k in keywords):
            raise ValueError("keywords must be a list of non-empty strings")
        return tuple(k.strip().lower() for k in keywords)

    @field_validator("aliases", mode="before")
    @classmethod
    def _alias_list(cls, aliases: Any) -> tuple[str, ...]:
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
            raise ValueError("aliases must be a list of non-empty strings")
        return tuple(normalize_name(a) for a in aliases)


class PresetFile(BaseModel):
    """A data file: `{"version": 1, "presets": [...]}`."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    presets: list[Preset]


def load_presets(directory: str | Path | None = None) -> dict[str, Preset]:
    """All presets in `directory` (default: the packaged data), name → Preset, in display order. Cached."""
    return _load(Path(directory).resolve() if directory is not None else DATA_DIR)


def preset_names() -> list[str]:
    return list(load_presets())


def normalize_name(name: str) -> str:
    """'Holy Gold', 'holy-gold' and 'HOLY_GOLD' all name `holy_gold`."""
    return re.sub(r"[\s\-]+", "_", name.strip()).lower()


def find_preset(name: str) -> Preset | None:
    """The preset called `name` or one of its aliases (case-insensitive, '-' or ' ' for '_'), or None.
    The one rule for "is this text a preset?": every prompt box, schedule and message goes through it."""
    if not isinstance(name, str):
        return None
    key = normalize_name(name)
    return load_presets().get(key) or _aliases(DATA_DIR).get(key)


@lru_cache(maxsize=8)
def _aliases(directory: Path) -> dict[str, Preset]:
    return {alias: p for p in _load(directory).values() for alias in p.aliases}


def get_preset(name: str) -> Preset:
    preset = find_preset(name)
    if preset is None:
        raise PresetError(f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    return preset


@lru_cache(maxsize=8)
def _load(directory: Path) -> dict[str, Preset]:
    if not directory.is_dir():
        raise PresetError(f"preset directory {directory} does not exist")
    files = sorted(directory.glob("*.json"))
    if not files:
        raise PresetError(f"no preset files (*.json) in {directory}")
    presets: list[Preset] = []
    seen: dict[str, Path] = {}
    for path in files:
        for preset in _read_file(path):
            if preset.name in seen:
                raise PresetError(f"preset {preset.name!r} is also defined in {seen[preset.name].name}",
                                  str(path))
            seen[preset.name] = path
            presets.append(preset)
    for preset in presets:
        for alias in preset.aliases:
            if alias in seen:
                raise PresetError(f"alias {alias!r} of {preset.name!r} names another preset", str(seen[preset.name]))
    presets.sort(key=lambda p: FAMILIES.index(p.family))  # stable: keeps file order within a family
    return {p.name: p for p in presets}


def _read_file(path: Path) -> list[Preset]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise PresetError(f"cannot read preset file: {e}", str(path)) from None
    except json.JSONDecodeError as e:
        raise PresetError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", str(path)) from None
    try:
        return PresetFile.model_validate(doc).presets
    except ValidationError as exc:
        raise PresetError(_with_preset_name(one_line(exc), doc), str(path)) from None


def _with_preset_name(message: str, doc: Any) -> str:
    """'presets[3].color: …' → 'presets[3] (foggy).color: …': the name finds the entry faster than its index."""
    m = re.match(r"presets\[(\d+)\]", message)
    if m is None:
        return message
    try:
        name = doc["presets"][int(m.group(1))]["name"]
    except (TypeError, KeyError, IndexError):
        name = None
    return f"{m.group(0)} ({name.strip()}){message[m.end():]}" if isinstance(name, str) and name.strip() else message
