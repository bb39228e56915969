"""The official AlayaRenderer-Flash weights layout: write random weights in it, and load a directory strictly.

    DIR/transformer/config.json                         HeliosTransformer3DModel config (+ "flash": our extras)
    DIR/transformer/diffusion_pytorch_model.safetensors the transformer (or a sharded *.safetensors.index.json)
    DIR/transformer_partial.safetensors                 Flash additions, loaded on top of transformer/:
                                                          patch_embedding (96-ch G-buffer patch embedding),
                                                          patch_short/mid/long (memory patchifiers),
                                                          norm_out.scale_shift_table, text_sink.*
    DIR/gbuf_small_encoder.safetensors                  grouped G-buffer encoder (encoder.N...)
    DIR/tiny_decoder/taew2_1_ft.safetensors             TAEHV decoder (decoder.N...; encoder.* ignored)
    DIR/text_embeddings.safetensors                     prompt-embedding cache (ours; optional)

Loading never half-loads: every file's keys and shapes are checked first, and a mismatch raises WeightsError
listing missing keys, unexpected keys and shape mismatches.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from renderer.base import RendererError
from renderer.flash.config import FlashConfig, get_config
from renderer.flash.decoder import fit_tgrow_weights

TRANSFORMER_CONFIG = "transformer/config.json"
TRANSFORMER_WEIGHTS = "transformer/diffusion_pytorch_model.safetensors"
TRANSFORMER_INDEX = "transformer/diffusion_pytorch_model.safetensors.index.json"
TRANSFORMER_PARTIAL = "transformer_partial.safetensors"
GBUFFER_ENCODER = "gbuf_small_encoder.safetensors"
TINY_DECODER = "tiny_decoder/taew2_1_ft.safetensors"
PARTIAL_PREFIXES = ("patch_embedding.", "patch_short.", "patch_mid.", "patch_long.",
                    "norm_out.scale_shift_table", "text_sink.")
SHOWN_KEYS = 6


class WeightsError(RendererError):
    """A weights directory or checkpoint that does not fit the model."""


def _short(keys: list[str]) -> str:
    more = f" (+{len(keys) - SHOWN_KEYS} more)" if len(keys) > SHOWN_KEYS else ""
    return ", ".join(keys[:SHOWN_KEYS]) + more


def check_state(expected: dict[str, torch.Tensor], state: dict[str, torch.Tensor], where: str,
                provided_elsewhere: set[str] | frozenset[str] = frozenset()) -> None:
    """Raise WeightsError naming missing / unexpected keys and shape mismatches of `state` against `expected`
    (keys in `provided_elsewhere` may be missing: another file supplies them)."""
    missing = sorted(k for k in expected if k not in state and k not in provided_elsewhere)
    unexpected = sorted(k for k in state if k not in expected)
    shapes = sorted(f"{k} {tuple(state[k].shape)} != {tuple(expected[k].shape)}"
                    for k in state if k in expected and state[k].shape != expected[k].shape)
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing key(s): {_short(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected key(s): {_short(unexpected)}")
    if shapes:
        problems.append(f"{len(shapes)} shape mismatch(es): {_short(shapes)}")
    if problems:
        raise WeightsError("checkpoint does not fit the model: " + "; ".join(problems), where)


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise WeightsError("file is missing", str(path))
    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise WeightsError(f"not a readable safetensors file ({exc})", str(path)) from None


def read_config(root: Path) -> FlashConfig:
    """transformer/config.json → FlashConfig: Helios arguments plus our "flash" extras (defaults: full)."""
    path = root / TRANSFORMER_CONFIG
    if not path.is_file():
        raise WeightsError("file is missing", str(path))
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise WeightsError(f"not valid JSON ({exc})", str(path)) from None
    if not isinstance(data, dict):
        raise WeightsError("expected a JSON object", str(path))
    extras = data.get("flash", {})
    if not isinstance(extras, dict):
        raise WeightsError("'flash' must be an object", str(path))
    base = get_config(extras.get("name", "full"))
    helios = {k: data[k] for k in ("num_layers", "num_attention_heads", "attention_head_dim", "ffn_dim",
                                   "text_dim", "freq_dim", "rope_dim", "patch_size") if k in data}
    in_ch = data.get("in_channels", base.in_channels)
    if in_ch != base.in_channels:
        raise WeightsError(f"in_channels is {in_ch}, expected {base.in_channels} (16 RGB + 5x16 G-buffer)",
                           str(path))
    try:
        return FlashConfig.from_json({**base.to_json(), **helios, **extras}, str(path))
    except TypeError as exc:
        raise WeightsError(f"bad config ({exc})", str(path)) from None


def _transformer_state(root: Path) -> dict[str, torch.Tensor]:
    index = root / TRANSFORMER_INDEX
    if index.is_file() and not (root / TRANSFORMER_WEIGHTS).is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, json.JSONDecodeError, KeyError, AttributeError) as exc:
            raise WeightsError(f"bad shard index ({exc})", str(index)) from None
        state = {}
        for shard in shards:
            state.update(read_safetensors(index.parent / shard))
        return state
    return read_safetensors(root / TRANSFORMER_WEIGHTS)


def load_transformer_weights(model: nn.Module, root: Path) -> None:
    """transformer/ then transformer_partial.safetensors on top. The partial must bring the text sink (the
    library model has none); the Flash-specific embeddings may come from either file, the partial winning."""
    expected = model.state_dict()
    base = _transformer_state(root)
    partial = read_safetensors(root / TRANSFORMER_PARTIAL)
    partial_keys = {k for k in expected if k.startswith(PARTIAL_PREFIXES)}
    check_state({k: expected[k] for k in partial_keys}, partial, str(root / TRANSFORMER_PARTIAL),
                provided_elsewhere={k for k in base if not k.startswith("text_sink.")})
    check_state(expected, base, str(root / TRANSFORMER_WEIGHTS), provided_elsewhere=set(partial) & partial_keys)
    model.load_state_dict({**base, **partial}, strict=True)


def load_module_weights(module: nn.Module, path: Path, ignore_prefixes: tuple[str, ...] = ()) -> None:
    state = {k: v for k, v in read_safetensors(path).items() if not k.startswith(ignore_prefixes)}
    if hasattr(module, "decoder"):
        state = fit_tgrow_weights(state, module.decoder)
    check_state(module.state_dict(), state, str(path))
    module.load_state_dict(state, strict=True)


def check_layout(root: Path) -> None:
    """An error naming what is missing when the directory is incomplete."""
    if not root.is_dir():
        raise WeightsError("weights directory does not exist", str(root))
    missing = [name for name in (TRANSFORMER_CONFIG, TRANSFORMER_PARTIAL, GBUFFER_ENCODER, TINY_DECODER)
               if not (root / name).is_file()]
    if not (root / TRANSFORMER_WEIGHTS).is_file() and not (root / TRANSFORMER_INDEX).is_file():
        missing.insert(1, TRANSFORMER_WEIGHTS)
    if missing:
        raise WeightsError(f"incomplete weights directory, missing {', '.join(missing)}", str(root))


def save_layout(root: Path, config: FlashConfig, transformer: nn.Module, gbuffer_encoder: nn.Module,
                decoder: nn.Module, dtype: torch.dtype = torch.float32) -> None:
    """Write the modules in the official layout (the text cache is written by the caller)."""
    (root / "transformer").mkdir(parents=True, exist_ok=True)
    (root / "tiny_decoder").mkdir(parents=True, exist_ok=True)

    def tensors(module: nn.Module, keep=lambda k: True) -> dict[str, torch.Tensor]:
        return {k: v.detach().to(dtype).contiguous() for k, v in module.state_dict().items() if keep(k)}

    import diffusers

    helios = dict(config.transformer_kwargs())
    extras = {k: v for k, v in config.to_json().items() if k not in helios}
    doc = {"_class_name": "HeliosTransformer3DModel", "_diffusers_version": diffusers.__version__,
           **helios, "flash": extras}
    (root / TRANSFORMER_CONFIG).write_text(json.dumps(doc, indent=2))
    save_file(tensors(transformer, lambda k: not k.startswith("text_sink.")), str(root / TRANSFORMER_WEIGHTS))
    save_file(tensors(transformer, lambda k: k.startswith(PARTIAL_PREFIXES)), str(root / TRANSFORMER_PARTIAL))
    save_file(tensors(gbuffer_encoder), str(root / GBUFFER_ENCODER))
    save_file(tensors(decoder), str(root / TINY_DECODER))
