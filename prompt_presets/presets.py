"""The style presets: loaded from the JSON data files in `prompt_presets/data/`, validated at load.

A data file is `{"version": 1, "presets": [{name, title, family, color, keywords, aliases, prompt, reference}, ...]}`;
`aliases` are other names for the preset ('lava' → volcano), matched like names.
Presets are ordered by family (the report's "flash" styles, then the original "alayarenderer" list), then by
their position in the file. See docs/presets.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from alaya_errors import UserError
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


@dataclass(frozen=True)
class Preset:
    name: str            # short id, snake_case: what schedules and the API use
    title: str           # what the UI shows
    prompt: str          # the full paragraph a neural renderer receives
    color: str           # thumbnail colour, "#rrggbb"
    family: str          # "flash" (the report's styles) or "alayarenderer" (the original list)
    reference: ReferenceParams
    keywords: tuple[str, ...] = ()  # for matching free text when no sentence-embedding model is available
    aliases: tuple[str, ...] = ()   # other names, normalized ('lava' for volcano)


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
    if not isinstance(doc, dict) or not isinstance(doc.get("presets"), list):
        raise PresetError('expected an object {"version": 1, "presets": [...]}', str(path))
    if doc.get("version", 1) != 1:
        raise PresetError(f"unsupported version {doc.get('version')!r}; expected 1", f"{path}: version")
    return [_parse_preset(raw, f"{path}: presets[{i}]") for i, raw in enumerate(doc["presets"])]


def _parse_preset(raw: Any, where: str) -> Preset:
    if not isinstance(raw, dict):
        raise PresetError(f"expected an object, got {type(raw).__name__}", where)
    allowed = {"name", "title", "prompt", "color", "family", "keywords", "aliases", "reference"}
    extra = sorted(set(raw) - allowed)
    if extra:
        raise PresetError(f"unknown field {extra[0]!r}; fields are {', '.join(sorted(allowed))}", where)
    name = _text(raw, "name", where)
    where = f"{where} ({name})"
    if not _NAME_RE.match(name):
        raise PresetError(f"name {name!r} must be snake_case (a-z, 0-9, _)", f"{where}.name")
    color = _text(raw, "color", where)
    if not _COLOR_RE.match(color):
        raise PresetError(f"color {color!r} is not '#rrggbb'", f"{where}.color")
    family = _text(raw, "family", where)
    if family not in FAMILIES:
        raise PresetError(f"family {family!r} is not one of {', '.join(FAMILIES)}", f"{where}.family")
    keywords = raw.get("keywords", [])
    if not isinstance(keywords, list) or not all(isinstance(k, str) and k.strip() for k in keywords):
        raise PresetError("keywords must be a list of non-empty strings", f"{where}.keywords")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise PresetError("aliases must be a list of non-empty strings", f"{where}.aliases")
    try:
        reference = ReferenceParams.from_dict(raw.get("reference", {}), f"{where}.reference")
    except UserError as e:
        raise PresetError(e.detail, e.where) from None
    return Preset(name=name, title=_text(raw, "title", where), prompt=_text(raw, "prompt", where),
                  color=color.lower(), family=family, reference=reference,
                  keywords=tuple(k.strip().lower() for k in keywords),
                  aliases=tuple(normalize_name(a) for a in aliases))


def _text(raw: dict, key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise PresetError(f"missing or empty text field {key!r}", f"{where}.{key}")
    return value.strip()
