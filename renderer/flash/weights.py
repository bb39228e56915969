"""The official AlayaRenderer-Flash weights layout: check a directory from its headers, load it, write one.

    DIR/transformer/config.json                         HeliosTransformer3DModel config (+ "flash": our extras)
    DIR/transformer/diffusion_pytorch_model.safetensors the transformer (or a sharded *.safetensors.index.json)
    DIR/transformer_partial.safetensors                 loaded on top of transformer/: may override any
                                                        transformer key (its shape wins), brings the text sink
    DIR/gbuf_small_encoder.safetensors                  G-buffer encoder, family read from its shapes
    DIR/tiny_decoder/taew2_1_ft.safetensors             TAEHV decoder (decoder.N...; encoder.* ignored;
                                                        guide.*: a guided decoder's G-buffer guide, ours)
    DIR/text_embeddings.safetensors                     prompt-embedding cache (ours; optional)
    DIR/gbuffer_refiner.safetensors                     G-buffer refiner (ours; only when the config's
                                                        refiner_looks > 0: small configs, renderer/flash/refiner.py)

`WeightsPlan(DIR)` reads only safetensors headers and config.json: it builds the modules on the meta device (no
memory), compares keys and shapes and keeps, per file, what is missing / unexpected / mismatched. `inspect`
reports that plan; `load` refuses a broken plan with one line, then builds on the meta device again and assigns
each tensor read straight in the target dtype and device (checkpoint.py), so loading never half-loads and
never holds a second copy of the model.
"""

from __future__ import annotations

import inspect
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from diffusers.models.transformers.transformer_helios import HeliosRotaryPosEmbed, HeliosTransformer3DModel
from safetensors.torch import save_file
from torch import nn

from renderer.base import RendererError
from renderer.flash.checkpoint import KeyMap, TensorInfo, WeightsError, load_tensor, mapped, read_header
from renderer.flash.config import HELIOS_SHAPE_ARGS, LATENT_CHANNELS, FlashConfig, get_config
from renderer.flash.decoder import TinyDecoder, decoder_channels
from renderer.flash.guide import GBufferGuide, affine_from_shapes, context_from_shapes, width_from_shapes
from renderer.flash.families import key_patterns, match_family, state_shapes
from renderer.flash.gbuffer_encoder import ENCODER_FAMILIES, GBufferEncoder
from renderer.flash.refiner import GBufferRefiner
from renderer.flash.taehv import TGrow
from renderer.flash.text import PROJECTION_FILE
from renderer.flash.transformer import SINK_PREFIX, FlashTransformer, TextSink, is_sink_key, sink_families

__all__ = ["WeightsError", "WeightsPlan", "save_layout"]

TRANSFORMER_CONFIG = "transformer/config.json"
TRANSFORMER_WEIGHTS = "transformer/diffusion_pytorch_model.safetensors"
TRANSFORMER_INDEX = "transformer/diffusion_pytorch_model.safetensors.index.json"
TRANSFORMER_PARTIAL = "transformer_partial.safetensors"
GBUFFER_ENCODER = "gbuf_small_encoder.safetensors"
TINY_DECODER = "tiny_decoder/taew2_1_ft.safetensors"
REFINER = "gbuffer_refiner.safetensors"
TRANSFORMER = "transformer/"
# what init-random writes into the partial (Flash additions); a real partial may hold any transformer key
PARTIAL_PREFIXES = ("patch_embedding.", "patch_short.", "patch_mid.", "patch_long.",
                    "norm_out.scale_shift_table", "text_sink.")
# sizes on the public model card (bytes); rounded there, so "agrees" means within CARD_TOLERANCE (the refiner
# is ours: not on the card)
CARD_BYTES = {TRANSFORMER: 3.1e9, TRANSFORMER_PARTIAL: 0.3e9, GBUFFER_ENCODER: 37e6, TINY_DECODER: 45e6}
CARD_TOLERANCE = 0.10
SHOWN_KEYS = 6
HELIOS_ARGS = frozenset(inspect.signature(HeliosTransformer3DModel.__init__).parameters) - {"self"}
IGNORED_UNEXPECTED = tuple(re.compile(p) for p in HeliosTransformer3DModel._keys_to_ignore_on_load_unexpected)


def _short(keys: list[str]) -> str:
    more = f" (+{len(keys) - SHOWN_KEYS} more)" if len(keys) > SHOWN_KEYS else ""
    return ", ".join(keys[:SHOWN_KEYS]) + more


@dataclass
class FileCheck:
    """One official file against this code: its tensors (model key → TensorInfo) and what does not fit."""

    name: str
    infos: dict[str, TensorInfo] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    errors: list[WeightsError] = field(default_factory=list)   # the file itself: absent, unreadable, bad config
    notes: list[str] = field(default_factory=list)         # loads, but worth knowing (sink unused, overrides)
    family: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched or self.errors)

    def compare(self, expected: dict[str, tuple], keys: list[str] | None = None, may_be_missing=frozenset()) -> None:
        """Record missing / unexpected / shape-mismatched keys of this file (or of `keys` of it) vs `expected`."""
        keys = list(self.infos) if keys is None else keys
        self.missing += sorted(k for k in expected if k not in self.infos and k not in may_be_missing)
        self.unexpected += sorted(k for k in keys if k not in expected
                                  and not any(p.search(k) for p in IGNORED_UNEXPECTED))
        self.mismatched += sorted(f"{k} {self.infos[k].shape} != {tuple(expected[k])}" for k in keys
                                  if k in expected and self.infos[k].shape != tuple(expected[k]))

    def problem(self) -> str:
        if self.errors:
            return self.errors[0].detail
        parts = [f"{len(v)} {label}: {_short(v)}" for label, v in (
            ("missing key(s)", self.missing), ("unexpected key(s)", self.unexpected),
            ("shape mismatch(es)", self.mismatched)) if v]
        return "checkpoint does not fit the model: " + "; ".join(parts)


def read_config(root: Path) -> FlashConfig:
    """transformer/config.json → FlashConfig: every HeliosTransformer3DModel argument (the shape ones as fields,
    the rest in `helios`, untouched) plus our "flash" extras; missing extras come from the named preset (full)."""
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
    unknown = sorted(k for k in data if not k.startswith("_") and k != "flash" and k not in HELIOS_ARGS)
    if unknown:
        raise WeightsError(f"{', '.join(unknown)}: not an argument of HeliosTransformer3DModel "
                           f"(diffusers {_diffusers_version()})", str(path))
    base = get_config(extras.get("name", "full"))
    for key, want in (("in_channels", base.in_channels), ("out_channels", LATENT_CHANNELS)):
        if data.get(key, want) != want:
            raise WeightsError(f"{key} is {data[key]}, expected {want} (16 RGB + 5x16 G-buffer in, 16 out)",
                               str(path))
    shape = {k: data[k] for k in HELIOS_SHAPE_ARGS if k in data}
    helios = {k: v for k, v in data.items() if k in HELIOS_ARGS and k not in HELIOS_SHAPE_ARGS
              and k not in ("in_channels", "out_channels")}
    try:
        return FlashConfig.from_json({**extras, **shape, "name": base.name, "helios": helios}, str(path))
    except RendererError as exc:
        raise WeightsError(exc.detail, exc.where) from None


def _diffusers_version() -> str:
    import diffusers

    return diffusers.__version__


def transformer_files(root: Path) -> list[Path]:
    """transformer/'s safetensors file, or its shards as listed by the index."""
    index = root / TRANSFORMER_INDEX
    if index.is_file() and not (root / TRANSFORMER_WEIGHTS).is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, json.JSONDecodeError, KeyError, AttributeError, TypeError) as exc:
            raise WeightsError(f"bad shard index ({exc})", str(index)) from None
        return [index.parent / shard for shard in shards]
    return [root / TRANSFORMER_WEIGHTS]


class WeightsPlan:
    """What loading `root` would do, from headers and config only. `ok` ⇔ `load()` succeeds."""

    def __init__(self, root: str | Path, key_map: KeyMap | None = None):
        self.root = Path(root)
        self.key_map = key_map
        self.files = {name: FileCheck(name) for name in (TRANSFORMER, TRANSFORMER_PARTIAL, GBUFFER_ENCODER,
                                                         TINY_DECODER)}
        self.config: FlashConfig | None = None
        self.sink: TextSink | None = None
        self.sink_note = ""
        self.encoder: GBufferEncoder | None = None
        self.decoder_channels: tuple[int, int, int, int] | None = None
        self.guide_width = 0                  # a guided decoder's G-buffer guide, read from the decoder file
        self.guide_context = False            # ... and whether it has its global context
        self.guide_affine = False             # ... and its per-pixel affine head
        if not self.root.is_dir():
            raise WeightsError("weights directory does not exist", str(self.root))
        try:
            self.config = read_config(self.root)
        except WeightsError as exc:
            self.files[TRANSFORMER].errors.append(exc)
        projection = self.root / PROJECTION_FILE
        if self.config is not None and self.config.text_encoder == "minilm" and not projection.is_file():
            # the config's sentence encoder cannot embed a prompt without its projection (renderer/flash/text.py)
            self.files[TRANSFORMER].errors.append(WeightsError("file is missing", str(projection)))
        if self.config is not None and self.config.refiner_looks:
            self.files[REFINER] = FileCheck(REFINER)
        for name, check in self.files.items():
            self._read(check, None if name == TRANSFORMER else [self.root / name])
        if self.config is not None:
            self._check_transformer()
            self._check_encoder()
            self._check_decoder()
            self._check_refiner()

    # ---- reading ------------------------------------------------------------------------------------------
    def _read(self, check: FileCheck, paths: list[Path] | None) -> None:
        try:
            paths = paths or transformer_files(self.root)
            infos: dict[str, TensorInfo] = {}
            for path in paths:
                infos.update(read_header(path))
            check.infos = mapped(infos, self.key_map)
        except WeightsError as exc:
            check.errors.append(exc)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files.values())

    def raise_if_broken(self) -> None:
        """The first problem as one line: the file and what does not fit (missing files all named at once)."""
        absent = [_relative(e.where, self.root) for f in self.files.values() for e in f.errors
                  if e.detail == "file is missing"]
        if absent:
            raise WeightsError(f"incomplete weights directory, missing {', '.join(absent)}", str(self.root))
        for name, f in self.files.items():
            if not f.ok:
                where = f.errors[0].where if f.errors else str(self.root / name).rstrip("/")
                raise WeightsError(f.problem(), where)

    @property
    def _config(self) -> FlashConfig:
        """The config, where it was read: the checks run only then, and `load` only after raise_if_broken (an
        unreadable config is an error on transformer/, so it raises first)."""
        assert self.config is not None, "config.json was not read"
        return self.config

    # ---- checks -------------------------------------------------------------------------------------------
    def _check_transformer(self) -> None:
        base, partial = self.files[TRANSFORMER], self.files[TRANSFORMER_PARTIAL]
        try:
            with torch.device("meta"):
                expected = state_shapes(FlashTransformer(self._config, sink=None))
        except (TypeError, ValueError, AssertionError) as exc:          # a Helios argument of the wrong kind
            base.errors.append(WeightsError(f"HeliosTransformer3DModel refuses it ({exc})",
                                            str(self.root / TRANSFORMER_CONFIG)))
            return
        self._check_sink(base, partial)
        if self.sink is not None:
            expected.update({SINK_PREFIX + k: v for k, v in state_shapes(self.sink).items()})
        sink_unused = self.sink is None
        partial_keys = [k for k in partial.infos if not (sink_unused and is_sink_key(k))]
        base_keys = [k for k in base.infos if k not in partial.infos and not (sink_unused and is_sink_key(k))]
        partial.compare(expected, partial_keys, may_be_missing=set(expected))
        base.compare(expected, base_keys, may_be_missing=set(partial_keys))
        overridden = [k for k in partial.infos if k in base.infos]
        reshaped = [k for k in overridden if partial.infos[k].shape != base.infos[k].shape]
        if overridden:
            partial.notes.append(f"overrides {len(overridden)} key(s) of transformer/"
                                 + (f", {len(reshaped)} with another shape: {_short(reshaped)}" if reshaped else ""))

    def _check_sink(self, base: FileCheck, partial: FileCheck) -> None:
        sink_infos = {k: i for f in (base, partial) for k, i in f.infos.items() if is_sink_key(k)}
        ours = {k[len(SINK_PREFIX):]: i.shape for k, i in sink_infos.items() if k.startswith(SINK_PREFIX)}
        match = match_family(sink_families(self._config), ours) if ours and len(ours) == len(sink_infos) else None
        if match:
            family, sink = match
            assert isinstance(sink, TextSink)              # sink_families builds TextSinks only
            self.sink = sink
            partial.family = f"text sink: {family.name}"
            return
        self.sink = None
        what = (f"sink keys {', '.join(key_patterns(sink_infos, 4))} match no sink layout we run"
                if sink_infos else "no text-sink keys")
        partial.family = "text sink: unused"
        self.sink_note = f"text_sink: unused ({what}; the model runs without a sink)"
        partial.notes.append(self.sink_note)

    def _check_encoder(self) -> None:
        check = self.files[GBUFFER_ENCODER]
        if check.errors:
            return
        match = match_family(ENCODER_FAMILIES, {k: i.shape for k, i in check.infos.items()})
        if match:
            family, encoder = match
            assert isinstance(encoder, GBufferEncoder)     # ENCODER_FAMILIES builds GBufferEncoders only
            encoder.input_range = self._config.gbuffer_input_range
            self.encoder = encoder
            check.family = family.name
            return
        check.family = "unknown"
        unknown = WeightsError(f"layout matches no G-buffer encoder family (key pattern: "
                               f"{', '.join(key_patterns(check.infos, 5))})", str(self.root / GBUFFER_ENCODER))
        check.notes.append(unknown.detail)
        with torch.device("meta"):         # what today's grouped design of this config would need
            check.compare(state_shapes(GBufferEncoder.for_config(self._config)))
        if check.ok:                       # no key diff: the pattern is all there is to say
            check.errors.append(unknown)

    def _check_decoder(self) -> None:
        check = self.files[TINY_DECODER]
        if check.errors:
            return
        check.infos = {k: i for k, i in check.infos.items() if not k.startswith("encoder.")}  # TAEHV's encoder
        self.decoder_channels = decoder_channels({k: i.shape for k, i in check.infos.items()},
                                                 self._config.decoder_channels)
        shapes = {k: i.shape for k, i in check.infos.items()}
        self.guide_width, self.guide_context = width_from_shapes(shapes), context_from_shapes(shapes)
        self.guide_affine = affine_from_shapes(shapes)
        with torch.device("meta"):
            decoder = TinyDecoder(self.decoder_channels, self.guide_width, self.guide_context, self.guide_affine)
        expected = state_shapes(decoder)
        for key in self._tgrow_keys(decoder):     # a wider TAEHV TGrow is cut at load, as TAEHV does
            info, want = check.infos.get(key), expected[key]
            if info is not None and info.shape[0] % want[0] == 0 and info.shape[1:] == want[1:]:
                expected[key] = info.shape
        check.compare(expected)
        check.family = f"TAEHV decoder, widths {self.decoder_channels}" + self._guide_note()

    def _refiner_shape(self) -> GBufferRefiner:
        with torch.device("meta"):
            return GBufferRefiner(self._config.refiner_looks, self._config.text_dim, self._config.refiner_hidden)

    def _check_refiner(self) -> None:
        check = self.files.get(REFINER)
        if check is None or check.errors:
            return
        refiner = self._refiner_shape()
        check.compare(state_shapes(refiner))
        check.family = (f"G-buffer refiner, {refiner.looks} looks, context width {self._config.refiner_hidden} "
                        f"({refiner.parameter_count():,} params)")

    @property
    def decoder_variant(self) -> str:
        """What decodes: the TAEHV decoder, alone or followed by the G-buffer refiner (`flash inspect`)."""
        widths = self.decoder_channels or (self.config.decoder_channels if self.config else None)
        text = f"TAEHV tiny decoder, widths {widths}"
        if self.config is not None and self.config.refiner_looks:
            text += f" + G-buffer refiner ({self._refiner_shape().parameter_count():,} params)"
        return text + self._guide_note()

    def _guide_note(self) -> str:
        if not self.guide_width:
            return ""
        with torch.device("meta"):
            params = GBufferGuide(self.guide_width, self.guide_context, self.guide_affine).parameter_count()
        parts = ", global context" * self.guide_context + ", per-pixel affine head" * self.guide_affine
        return f" + G-buffer guide, width {self.guide_width}{parts} ({params:,} params)"

    @staticmethod
    def _tgrow_keys(decoder: TinyDecoder) -> list[str]:
        return [f"decoder.{i}.conv.weight" for i, b in enumerate(decoder.decoder) if isinstance(b, TGrow)]

    # ---- loading ------------------------------------------------------------------------------------------
    def load(self, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
             ) -> tuple[FlashTransformer, GBufferEncoder, TinyDecoder]:
        """The three modules, each tensor read once straight into `dtype` on `device` (fp32 where diffusers
        keeps fp32). Raises WeightsError (one line) when the plan is broken."""
        self.raise_if_broken()
        if self.sink is None:
            warnings.warn(f"{self.root}: {self.sink_note}", stacklevel=2)
        with torch.device("meta"):
            transformer = FlashTransformer(self._config, sink=self.sink)
            decoder = TinyDecoder(self.decoder_channels, self.guide_width, self.guide_context, self.guide_affine)
        base, partial = self.files[TRANSFORMER], self.files[TRANSFORMER_PARTIAL]
        wanted = set(transformer.state_dict())
        infos = {k: i for k, i in {**base.infos, **partial.infos}.items() if k in wanted}
        keep = tuple(transformer._keep_in_fp32_modules)

        def kind(key: str) -> torch.dtype:
            return torch.float32 if any(part in keep for part in key.split(".")) else dtype

        with torch.device(device):           # non-persistent buffers: recomputed, not stored
            transformer.rope = HeliosRotaryPosEmbed(self._config.rope_dim, transformer.rope.theta)
        _assign(transformer, {k: load_tensor(i, device, kind(k)) for k, i in infos.items()})
        encoder = self.encoder
        assert encoder is not None           # a plan that passed raise_if_broken matched an encoder family
        _assign(encoder, {k: load_tensor(i, device, dtype) for k, i in self.files[GBUFFER_ENCODER].infos.items()})
        dec_state = {k: load_tensor(i, device, dtype) for k, i in self.files[TINY_DECODER].infos.items()}
        for key in self._tgrow_keys(decoder):
            want = decoder.state_dict()[key].shape[0]
            dec_state[key] = dec_state[key][-want:].contiguous()
        _assign(decoder, dec_state)
        return transformer, encoder, decoder

    def load_refiner(self, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
                     ) -> GBufferRefiner | None:
        """The G-buffer refiner the config names (None when it names none); call after `load`."""
        self.raise_if_broken()
        if REFINER not in self.files:
            return None
        refiner = self._refiner_shape()
        _assign(refiner, {k: load_tensor(i, device, dtype) for k, i in self.files[REFINER].infos.items()})
        return refiner

    # ---- the report ---------------------------------------------------------------------------------------
    def report(self) -> dict:
        """What `alaya-studio flash inspect` prints: per file tensors, bytes, dtypes, key tree, verdict, card."""
        from renderer.flash.inspect import file_report

        return {"dir": str(self.root), "loads": self.ok,
                "config": self.config.to_json() if self.config else None,
                "text_sink": "used" if self.sink is not None else "unused",
                "mean_flow": bool(self.config and self.config.interval_embedding),   # the interval embedding
                "decoder": self.decoder_variant,
                "files": {name: file_report(f, CARD_BYTES.get(name), CARD_TOLERANCE)
                          for name, f in self.files.items()}}


def _relative(where: str | None, root: Path) -> str:
    if where is None:                     # an error that names no file is about the directory itself
        return str(root)
    try:
        return str(Path(where).relative_to(root))
    except ValueError:
        return str(where)


def _assign(module: nn.Module, state: dict[str, torch.Tensor]) -> None:
    module.load_state_dict(state, strict=True, assign=True)
    left = [n for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if left:
        raise WeightsError(f"nothing loaded into {_short(left)}")


def save_layout(root: Path, config: FlashConfig, transformer: nn.Module, gbuffer_encoder: nn.Module,
                decoder: nn.Module, dtype: torch.dtype = torch.float32, refiner: nn.Module | None = None) -> None:
    """Write the modules in the official layout (the text cache is written by the caller), and the refiner
    beside them when the config has one."""
    if bool(config.refiner_looks) != (refiner is not None):
        raise WeightsError(f"config refiner_looks={config.refiner_looks} but "
                           f"{'no' if refiner is None else 'a'} refiner was given", str(root))
    (root / "transformer").mkdir(parents=True, exist_ok=True)
    (root / "tiny_decoder").mkdir(parents=True, exist_ok=True)

    def tensors(module: nn.Module, keep=lambda k: True) -> dict[str, torch.Tensor]:
        return {k: v.detach().to(dtype).contiguous() for k, v in module.state_dict().items() if keep(k)}

    helios = dict(config.transformer_kwargs())
    extras = {k: v for k, v in config.to_json().items() if k not in helios and k != "helios"}
    doc = {"_class_name": "HeliosTransformer3DModel", "_diffusers_version": _diffusers_version(),
           **helios, "flash": extras}
    (root / TRANSFORMER_CONFIG).write_text(json.dumps(doc, indent=2))
    save_file(tensors(transformer, lambda k: not k.startswith("text_sink.")), str(root / TRANSFORMER_WEIGHTS))
    save_file(tensors(transformer, lambda k: k.startswith(PARTIAL_PREFIXES)), str(root / TRANSFORMER_PARTIAL))
    save_file(tensors(gbuffer_encoder), str(root / GBUFFER_ENCODER))
    save_file(tensors(decoder), str(root / TINY_DECODER))
    if refiner is not None:
        save_file(tensors(refiner), str(root / REFINER))

