"""Several phrasings of each preset (`data/phrasings/styles.json`): the texts a small model's prompt
embeddings are trained on, so that free text it never saw lands near its style (docs/training.md).

A preset's phrasings are its own prompt first (what the studio sends for the preset, so the trained embedding is
the one served), then its title, then the file's list.
"""

from __future__ import annotations

import json
from functools import lru_cache

from prompt_presets.presets import DATA_DIR, PresetError, get_preset, load_presets

PHRASINGS_FILE = DATA_DIR / "phrasings" / "styles.json"


def phrasings(name: str) -> tuple[str, ...]:
    preset = get_preset(name)
    return (preset.prompt, preset.title, *_extra().get(preset.name, ()))


def all_phrasings() -> dict[str, tuple[str, ...]]:
    """preset name → its phrasings, every preset in display order."""
    return {name: phrasings(name) for name in load_presets()}


@lru_cache(maxsize=1)
def _extra() -> dict[str, tuple[str, ...]]:
    try:
        doc = json.loads(PHRASINGS_FILE.read_text(encoding="utf-8"))
        table = {name: tuple(texts) for name, texts in doc["phrasings"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PresetError(f"cannot read the phrasings: {exc}", str(PHRASINGS_FILE)) from None
    unknown = sorted(set(table) - set(load_presets()))
    if unknown:
        raise PresetError(f"phrasings for unknown preset(s) {', '.join(unknown)}", str(PHRASINGS_FILE))
    return table
