"""`alaya-studio train`: fine-tune (or train from scratch) a Flash model on paired recordings.

    start        --weights DIR (official layout, ours or the official model) or from scratch (--config tiny|nano)
    codecs       from scratch: the G-buffer encoder trains jointly with the transformer; RGB latents and the
                 shipped decoder come from `train codec` (--codec DIR). A fine-tune keeps the weights' codecs:
                 targets from their own RGB encoder when the directory has one (ours), else the Wan VAE (--vae);
                 given --codec (one adapted to a game, `train codec --from WEIGHTS --freeze-encoder`), it learns
                 that codec's latents and ships that codec's decoder.
    objective    objective.py: flow matching (or, --objective meanflow, mean flow) with teacher-forced history
                 ("flow"), then self-rollout history ("rollout") from `rollout_start` of the steps on, for
                 `rollout_prob` of the batches; up to `history_chunks` warm-up chunks fill the history first;
                 --gan-weight W > 0 adds the patch-GAN term (gan.py)
    refiner      --refiner: after the steps, the G-buffer refiner (renderer/flash/refiner.py) is fitted on the
                 trained model's own decoded frames (refiner_fit.py) and exported beside the decoder
    LoRA         --lora-rank R: peft adapters on the transformer's attention (targets are an option), plus the
                 text sink trained fully; merged into the exported weights (the adapter is also saved)
    devices      bf16 autocast and gradient checkpointing on CUDA; torchrun → DDP (FSDP with --fsdp)
    bookkeeping  checkpoints every N steps, --resume, tqdm bar (loss, steps/s, ETA), train_log.jsonl, loss.png
    output       OUT_DIR in the official layout: `--renderer flash --weights OUT_DIR` loads it
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from gbuffer.formats import open_sequence
from prompt_presets.phrasings import all_phrasings
from prompt_presets.resolve import resolve_prompt
from renderer.flash.config import TEMPORAL_SCALE, FlashConfig, get_config
from renderer.flash.decoder import TinyDecoder
from renderer.flash.gbuffer_encoder import GBufferEncoder
from renderer.flash.pipeline import FlashPipeline, preset_prompts
from renderer.flash.text import PromptBank, SentenceProjection, UMT5PromptEncoder, random_embedding
from renderer.flash.transformer import FlashTransformer
from training import bookkeeping, distributed
from training.codec import CODEC_JSON, Codec, load_codec, save_codec
from training.data import PairedClips, load_recording, prompt_for, read_prompt_file
from training.errors import TrainingError
from training.gan import GanTerm
from training.objective import OBJECTIVES, FlashTrainee, Objective, ObjectiveSettings, warmup_chunks_to_reach_long
from training.refiner_fit import Look, RefinerSettings, fit_refiner
from training.style_targets import style_frames
from training.styles import StyleTargets, parse_styles
from training.targets import CodecTargets, LatentCache, Targets, wan_vae_targets

LORA_DIR = "lora_adapter"
DEFAULT_LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0")


@dataclass
class TrainSettings:
    config: str = "nano"
    weights: str | None = None
    codec: str | None = None
    vae: str | None = None
    text_encoder: str | None = None
    prompts: str | None = None
    styles: str | None = None        # --styles LIST|all: each clip draws one (training/styles.py)
    sentence_encoder: bool = True    # from scratch, no umT5: prompts by MiniLM (False: fixed random embeddings)
    width: int = 160
    height: int = 96
    steps: int = 1000
    batch: int = 2
    lr: float = 5e-4
    chunks: int = 3
    discrete_sigma_prob: float = 0.5
    objective: Objective = "flow"    # flow | meanflow (objective.py; check_settings refuses any other)
    interval_prob: float = 0.5       # mean flow: share of continuous draws with r < t
    history_chunks: int | None = None  # warm-up chunks before the trained ones, drawn 0..N per step (None: enough
                                       # for the long tier, auto_history_chunks)
    gan_weight: float = 0.0          # the patch-GAN term's weight (0: off; gan.py)
    gan_lr: float = 2e-4
    rollout_start: float = 0.5       # self-rollout from this step on: a fraction of --steps if < 1, else a step
    rollout_prob: float = 0.5        # share of batches with self-rollout history once started
    lora_rank: int = 0               # 0: full fine-tuning
    lora_alpha: float = 16.0
    lora_targets: tuple[str, ...] = DEFAULT_LORA_TARGETS
    checkpoint_every: int = 100
    log_every: int = 10
    max_minutes: float | None = None  # stop early (checkpoint, export) after this much wall time
    seed: int = 0
    device: str | None = None
    fsdp: bool = False
    gradient_checkpointing: bool | None = None     # None: on for CUDA
    cache_targets: bool = True       # our codec's RGB latents computed once per recording (clips start every 4th frame)
    refiner: bool = False            # fit and export the G-buffer refiner after the steps (refiner_fit.py)
    refiner_steps: int = 300         # its context branch's Adam steps
    refiner_windows: int = 2         # streamed windows per (recording, look) it is fitted on
    refiner_frames: int = 24         # frames per window
    refiner_recordings: tuple[str, ...] = ()   # fitted on these, not the training recordings (docs/training.md)
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {**asdict(self), "lora_targets": list(self.lora_targets),
                "refiner_recordings": list(self.refiner_recordings)}


def check_settings(s: TrainSettings) -> FlashConfig:
    config = get_config(s.config)
    if s.styles is not None:
        parse_styles(s.styles)
    for name in ("steps", "batch", "chunks", "checkpoint_every", "log_every"):
        if getattr(s, name) < 1:
            raise TrainingError(f"must be at least 1, got {getattr(s, name)}", f"--{name.replace('_', '-')}")
    for name in ("width", "height"):
        v = getattr(s, name)
        if v < 16 or v % 16:
            raise TrainingError(f"{name} {v} must be a positive multiple of 16 (8x codec, 2x2 patches)", "--size")
    if s.rollout_start < 0 or not 0 <= s.rollout_prob <= 1 or not 0 <= s.discrete_sigma_prob <= 1:
        raise TrainingError("rollout start must be >= 0; rollout share and discrete-sigma share are in [0, 1]")
    if s.objective not in OBJECTIVES:
        raise TrainingError(f"unknown objective {s.objective!r}; choose one of {', '.join(OBJECTIVES)}",
                            "--objective")
    if s.history_chunks is not None and s.history_chunks < 0:
        raise TrainingError(f"must be >= 0, got {s.history_chunks}", "--history-chunks")
    if s.gan_weight < 0 or not 0 <= s.interval_prob <= 1:
        raise TrainingError("the GAN weight must be >= 0 and the interval share in [0, 1]", "--gan-weight")
    if s.lora_rank < 0:
        raise TrainingError(f"must be >= 0, got {s.lora_rank}", "--lora-rank")
    if s.refiner and config.name == "full":
        raise TrainingError("the G-buffer refiner is for small configs; the full config keeps the official layout",
                            "--refiner")
    if s.refiner and min(s.refiner_steps, s.refiner_windows, s.refiner_frames) < 1:
        raise TrainingError("refiner steps, windows and frames must be at least 1", "--refiner-steps")
    if s.refiner_recordings and not s.refiner:
        raise TrainingError("recordings to fit the refiner on need --refiner", "--refiner-on")
    if s.weights is None and config.name == "full":
        raise TrainingError("the full 1.3B model is fine-tuned from its weights: give --weights DIR", "--config")
    if s.weights is None and s.codec is None:
        raise TrainingError("training from scratch needs RGB latents: give --codec DIR (alaya-studio train codec)",
                            "--codec")
    return config


# ---- model setup -------------------------------------------------------------------------------------------

@dataclass
class Modules:
    config: FlashConfig
    transformer: FlashTransformer      # the base model (apply_lora wraps it for training, in place)
    gbuffer_encoder: GBufferEncoder
    decoder: TinyDecoder
    targets: Targets
    rgb_encoder: Codec | None          # exported beside the decoder when we trained it
    bank: PromptBank
    train_gbuffer_encoder: bool


def _own_codec(root: Path) -> Codec | None:
    """The RGB encoder + decoder a weights directory written by `train` keeps in its tiny-decoder file."""
    if not (root / CODEC_JSON).is_file():
        return None
    return load_codec(root)


def _check_decoder_widths(codec: Codec, config: FlashConfig) -> None:
    if codec.decoder_channels != tuple(config.decoder_channels):
        raise TrainingError(f"codec decoder widths {list(codec.decoder_channels)} differ from config "
                            f"{config.name}'s {list(config.decoder_channels)}: train the codec with "
                            f"--config {config.name}", "--codec")


def build_modules(s: TrainSettings, config: FlashConfig, device: str) -> Modules:
    targets: Targets
    if s.weights is not None:
        pipe = FlashPipeline.from_dir(s.weights, device="cpu", dtype=torch.float32, text_encoder=s.text_encoder)
        config = pipe.config
        if s.config != config.name:
            raise TrainingError(f"--config {s.config} but the weights are config {config.name!r}", "--config")
        transformer, gbuffer_encoder, decoder, bank = pipe.transformer, pipe.gbuffer_encoder, pipe.decoder, pipe.prompts
        codec = load_codec(s.codec) if s.codec else _own_codec(Path(s.weights))
        if s.codec and codec is not None:
            # the latents it learns are this codec's, so the decoder it ships is too: a codec adapted to a game
            # (`train codec --from WEIGHTS --freeze-encoder`) brings its decoder and guide into the model
            _check_decoder_widths(codec, config)
            decoder = codec.decoder_module()
            config = dataclasses.replace(config, guide_width=codec.guide_width)
        if codec is not None:
            targets = CodecTargets(codec.encoder_module().to(device))
        elif s.vae:
            targets = wan_vae_targets(s.vae, device)
        else:
            raise TrainingError("no RGB encoder for these weights: give --vae WAN_DIR (the Wan 2.1 VAE) or --codec",
                                "--vae")
        train_encoder = False                      # a fine-tune keeps the official codecs
    else:
        torch.manual_seed(s.seed)
        assert s.codec is not None, "check_settings asks for --codec from scratch"
        codec = load_codec(s.codec)
        _check_decoder_widths(codec, config)
        # the transformer is initialised first, from the seed: building the decoder (a TinyDecoder draws initial
        # weights before the codec's are copied in) before it would change every model a seed gives
        transformer, gbuffer_encoder = FlashTransformer(config), GBufferEncoder.for_config(config)
        decoder = codec.decoder_module()
        config = dataclasses.replace(config, guide_width=codec.guide_width)
        targets = CodecTargets(codec.encoder_module().to(device))
        bank, config = scratch_prompt_bank(s, config)
        train_encoder = True
    if config.guide_width and s.refiner:
        raise TrainingError("a guided decoder draws the picture itself: it takes no G-buffer refiner", "--refiner")
    for module in (transformer, gbuffer_encoder):
        module.requires_grad_(True).train()
    return Modules(config, transformer, gbuffer_encoder, decoder, targets, codec, bank, train_encoder)


def scratch_prompt_bank(s: TrainSettings, config: FlashConfig) -> tuple[PromptBank, FlashConfig]:
    """From scratch: umT5 when --text-encoder names one; else the sentence encoder (the config then records
    text_encoder "minilm"; its projection is fitted on every preset's phrasings, whichever styles train), or the
    fixed random embeddings of before when it is switched off."""
    presets = preset_prompts()
    if s.text_encoder or not s.sentence_encoder:
        encoder = UMT5PromptEncoder(s.text_encoder, config.text_len, config.text_dim) if s.text_encoder else None
        return PromptBank(config.text_len, config.text_dim,
                          {t: random_embedding(t, config.text_len, config.text_dim) for t in presets}, encoder), config
    projection = SentenceProjection.fit([t for texts in all_phrasings().values() for t in texts], config.text_dim)
    cached = dict(zip(presets, projection.embed(presets).unsqueeze(1)))        # text → (1, text_dim)
    return (PromptBank(config.text_len, config.text_dim, cached, projection),
            dataclasses.replace(config, text_encoder="minilm"))


def prompt_embeddings(bank: PromptBank, prompts: list[str], config: FlashConfig) -> torch.Tensor:
    """(P, text_len, text_dim) for the dataset's prompts; from scratch with no text encoder every new prompt
    gets a fixed random embedding (saved in the output's prompt cache, so the studio can use it)."""
    out = []
    for text in prompts:
        if text not in bank.cached and bank.encoder is None:
            bank.cached[text] = random_embedding(text, config.text_len, config.text_dim)
        out.append(bank.prompt(text))
    return torch.stack(out)


def apply_lora(transformer: torch.nn.Module, s: TrainSettings) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    # peft annotates lora_alpha as int, but only ever scales by lora_alpha / r: a float (--lora-alpha 0.5) works
    config = LoraConfig(r=s.lora_rank, lora_alpha=s.lora_alpha,  # type: ignore[arg-type]
                        target_modules=list(s.lora_targets),
                        lora_dropout=0.0, init_lora_weights=True)
    try:
        model = get_peft_model(transformer, config)
    except ValueError as exc:
        raise TrainingError(f"LoRA targets {list(s.lora_targets)} do not fit the transformer: "
                            f"{str(exc).splitlines()[0][:160]}", "--lora-targets") from None
    for name, param in model.named_parameters():
        if ".text_sink." in name:                  # Flash's own small addition trains fully
            param.requires_grad_(True)
    return model


def merged_transformer(transformer: torch.nn.Module, adapter_dir: Path | None) -> FlashTransformer:
    """The trained transformer as a pipeline holds it: with LoRA (`adapter_dir`), the adapter alone is saved
    there for reference, then merged into the base model."""
    if adapter_dir is not None:
        from peft import PeftModel

        if not isinstance(transformer, PeftModel):
            raise TypeError(f"a LoRA run trains a PeftModel, not a {type(transformer).__name__}")
        transformer.save_pretrained(str(adapter_dir))
        transformer = transformer.merge_and_unload()
    if not isinstance(transformer, FlashTransformer):
        raise TypeError(f"expected the FlashTransformer, got a {type(transformer).__name__}")
    return transformer


def prepare_objective(m: Modules, s: TrainSettings) -> None:
    """Mean flow needs the interval embedding: a model without one gains it, zero-initialised (so a fine-tune
    starts from what the weights compute), and the exported config records it."""
    if s.objective == "meanflow" and not m.config.interval_embedding:
        m.transformer.add_interval_embedding()
        m.config = dataclasses.replace(m.config, interval_embedding=True)


def auto_history_chunks(recordings: list[str], config: FlashConfig, chunks: int) -> int:
    """Warm-up chunks enough for the last trained chunk to reach the long history tier, as many as the shortest
    recording allows beside the trained chunks (read from the sources' lengths, nothing decoded)."""
    try:
        shortest = min(_frames(path) for path in recordings)
    except (OSError, ValueError, TypeError):   # UserError is a ValueError; the real load names what is wrong
        return warmup_chunks_to_reach_long(config, chunks)
    return max(0, min(warmup_chunks_to_reach_long(config, chunks), shortest // config.chunk_frames - chunks))


def _frames(path: str) -> int:
    with open_sequence(Path(path)) as source:
        return len(source)


# ---- the run -----------------------------------------------------------------------------------------------

class Trainer:
    def __init__(self, recordings: list[str], out: str | Path, s: TrainSettings, resume: bool = False,
                 progress: bool = True):
        self.s = s
        self.recordings = [str(Path(p).resolve()) for p in recordings]   # eval fits its baseline on these
        self.refiner_recordings = [str(Path(p).resolve()) for p in s.refiner_recordings]
        shared = set(self.recordings) & set(self.refiner_recordings)
        if shared:
            raise TrainingError(f"{Path(sorted(shared)[0]).name} is a training recording: the refiner's own "
                                "recordings are frames the transformer never trains on", "--refiner-on")
        missing = [p for p in self.refiner_recordings if not Path(p).is_file()]
        if missing:
            raise TrainingError(f"no recording at {Path(missing[0]).name}", "--refiner-on")
        self.config = check_settings(s)
        self.out = bookkeeping.check_output_dir(out)
        self.dist = distributed.setup()
        self.device = self.dist.device(s.device)
        self.cuda = self.device.startswith("cuda")
        self.progress = progress and self.dist.is_main
        self.modules = build_modules(s, self.config, self.device)
        prepare_objective(self.modules, s)
        self.config = self.modules.config
        self.history_chunks = (auto_history_chunks(recordings, self.config, s.chunks) if s.history_chunks is None
                               else s.history_chunks)
        codec_targets = self.modules.targets if isinstance(self.modules.targets, CodecTargets) else None
        cache = s.cache_targets and codec_targets is not None
        clip_chunks = self.history_chunks + s.chunks
        styles = StyleTargets(parse_styles(s.styles), keep=not cache) if s.styles is not None else None
        self.data = PairedClips.from_paths(recordings, s.width, s.height, clip_chunks * self.config.chunk_frames,
                                           s.prompts, start_stride=TEMPORAL_SCALE if cache else 1, styles=styles,
                                           also_named=self.refiner_recordings)
        self.latents = (LatentCache(codec_targets, self.data.recordings, self.device, styles)
                        if cache and codec_targets is not None else None)
        self.prompts = prompt_embeddings(self.modules.bank, self.data.prompts, self.config)
        transformer: torch.nn.Module = self.modules.transformer
        if s.lora_rank:
            transformer = apply_lora(transformer, s)
        if s.gradient_checkpointing if s.gradient_checkpointing is not None else self.cuda:
            self.modules.transformer.enable_gradient_checkpointing()    # the base model, LoRA-wrapped or not
        if not self.modules.train_gbuffer_encoder:
            self.modules.gbuffer_encoder.requires_grad_(False).eval()
        self.gan = (GanTerm(copy.deepcopy(self.modules.decoder), s.gan_weight, s.gan_lr, self.device, s.seed)
                    if s.gan_weight > 0 else None)
        self.trainee = FlashTrainee(self.config, transformer, self.modules.gbuffer_encoder,
                                    ObjectiveSettings(s.chunks, s.discrete_sigma_prob, s.objective, s.interval_prob),
                                    torch.bfloat16 if self.cuda else None, self.gan).to(self.device)
        self.model = distributed.wrap(self.trainee, self.dist, s.fsdp)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=s.lr, weight_decay=0.0, betas=(0.9, 0.99))
        self.generator = torch.Generator().manual_seed(s.seed + 1000 * self.dist.rank)
        self.step = 0
        self.log = bookkeeping.JsonlLog(self.out / bookkeeping.LOG_FILE, append=resume)
        if resume:
            self._resume()

    def _resume(self) -> None:
        path = bookkeeping.latest_checkpoint(self.out)
        if path is None:
            raise TrainingError("--resume given but there is no checkpoint in checkpoints/", str(self.out))
        state = bookkeeping.load_checkpoint(path)
        saved = state.get("settings", {})
        for key in ("config", "lora_rank", "width", "height", "chunks", "cache_targets", "objective", "styles"):
            if key in saved and saved[key] != getattr(self.s, key):
                raise TrainingError(f"checkpoint was trained with {key}={saved[key]!r}, this run has "
                                    f"{getattr(self.s, key)!r}", str(path))
        try:
            distributed.unwrap(self.model).load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise TrainingError(f"checkpoint does not fit this model: {str(exc).splitlines()[0][:160]}",
                                str(path)) from None
        if self.gan is not None and "gan" in state:
            self.gan.load_state_dict(state["gan"])
        self.generator.set_state(state["generator"])
        self.step = int(state["step"])
        self.log.truncate_after(self.step)

    def stage(self, step: int) -> str:
        """The stage of 0-based `step`; an absolute start keeps a resumed run with more --steps on schedule."""
        start = self.s.rollout_start if self.s.rollout_start >= 1 else self.s.rollout_start * self.s.steps
        return "rollout" if step >= start else "flow"

    def train_step(self) -> tuple[float, str]:
        """One optimiser step → (its loss, its stage); the trainee's `unweighted_mse` is that step's too."""
        s = self.s
        stage = self.stage(self.step)
        rollout = stage == "rollout" and bool(torch.rand(1, generator=self.generator) < s.rollout_prob)
        batch = self.data.sample(s.batch, self.generator, with_rgb=self.latents is None)
        if self.latents is not None:
            target = self.latents.clips(batch.picks, self.data.clip_frames, batch.styles).to(self.device)
        else:
            assert batch.rgb is not None, "sampled with_rgb"
            target = self.modules.targets(batch.rgb.to(self.device)).float()
        gbuffer, target, warmup = self.warmup_window(batch.gbuffer, target)
        loss = self.model(gbuffer.to(self.device), target, self.prompts[batch.prompt].to(self.device), rollout,
                          self.generator, warmup)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], 1.0)
        self.optimizer.step()
        if self.gan is not None:
            self.gan.discriminator_step()
        return loss.item(), stage + ("+self" if rollout else "")

    def warmup_window(self, gbuffer: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """A clip holds `history_chunks` warm-up chunks before the trained ones; this step keeps the last w of
        them, w drawn in 0..history_chunks, so the empty-history start (the rollout's first chunk) trains too."""
        extra = self.history_chunks
        if not extra:
            return gbuffer, target, 0
        w = int(torch.randint(extra + 1, (1,), generator=self.generator))
        drop = extra - w
        return (gbuffer[:, drop * self.config.chunk_frames:], target[:, :, drop * self.config.chunk_latents:], w)

    def run(self) -> dict:
        from tqdm import tqdm

        s = self.s
        if self.dist.is_main:
            # "recordings": every recording the model was fitted on, the refiner's too (eval's per-pixel
            # baseline is fitted on the same frames)
            named = {**self.s.to_json(), "recordings": self.recordings + self.refiner_recordings,
                     "transformer_recordings": self.recordings}
            (self.out / bookkeeping.SETTINGS_FILE).write_text(json.dumps(named, indent=2))
        bar = tqdm(total=s.steps, initial=self.step, desc="train", unit="step", file=sys.stderr,
                   disable=not self.progress, dynamic_ncols=True)
        t0, done, last = time.perf_counter(), 0, {}
        while self.step < s.steps:
            loss, stage = self.train_step()
            self.step += 1
            done += 1
            rate = done / (time.perf_counter() - t0)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", stage=stage.split("+")[0])
            last = {"step": self.step, "loss": loss, "stage": stage.split("+")[0], "self_rollout": "+self" in stage,
                    "lr": s.lr, "steps_per_s": round(rate, 4)}
            if self.trainee.unweighted_mse is not None:      # mean flow: its loss is weighted to sit near 1
                last["mse"] = self.trainee.unweighted_mse
            if self.dist.is_main and (self.step % s.log_every == 0 or self.step == s.steps):
                self.log.write(last)
            out_of_time = s.max_minutes is not None and time.perf_counter() - t0 > 60 * s.max_minutes
            if self.dist.active:                   # every rank stops at the same step
                flag = torch.tensor([float(out_of_time)], device=self.device)
                torch.distributed.all_reduce(flag)
                out_of_time = bool(flag.item())
            if self.step % s.checkpoint_every == 0 or self.step == s.steps or out_of_time:
                if out_of_time and self.dist.is_main and self.step % s.log_every:
                    self.log.write(last)
                self.checkpoint()
            if out_of_time:
                last["stopped"] = "max_minutes"
                break
        bar.close()
        self.export()
        self.dist.close()
        return last

    def checkpoint(self) -> None:
        state = {"model": distributed.unwrap(self.model).state_dict(), "optimizer": self.optimizer.state_dict(),
                 "generator": self.generator.get_state(), "step": self.step, "settings": self.s.to_json()}
        if self.gan is not None:
            state["gan"] = self.gan.state_dict()
        if self.dist.is_main:
            bookkeeping.save_checkpoint(self.out, self.step, state)
            bookkeeping.draw_loss_curve(self.log.records(), self.out / bookkeeping.LOSS_PNG)
        self.dist.barrier()

    def refiner_data(self) -> list:
        """The recordings the refiner is fitted on: --refiner-on's, else the training recordings. Its head leans
        on the decoded colour as far as that colour predicts the target, so fitted on frames the transformer
        trained on (and decodes better than any new frame) it would lean on it too far for new frames."""
        if not self.refiner_recordings:
            return self.data.recordings
        prompts = read_prompt_file(self.s.prompts)
        return [load_recording(p, self.s.width, self.s.height, prompt_for(Path(p), prompts))
                for p in self.refiner_recordings]

    def refiner_looks(self, recs: list) -> list[Look]:
        """What the refiner routes among: the run's styles, else each distinct recording prompt (its RGB)."""
        styles = self.data.styles
        if styles is not None:
            from renderer import create_renderer

            reference = create_renderer("reference")

            def frames(name: str) -> Callable[[int, list[int]], np.ndarray]:
                return lambda k, idx: style_frames(recs[k], name, idx, renderer=reference)

            return [Look(name, resolve_prompt(name).text, styles.phrasings(name), list(range(len(recs))),
                         frames(name))
                    for name in styles.names]
        return [Look(text[:40], text, (text,), [k for k, r in enumerate(recs) if r.prompt == text],
                     lambda k, idx: recs[k].rgb[idx].permute(0, 2, 3, 1).contiguous().numpy())
                for text in self.data.prompts]

    def export(self) -> None:
        """OUT_DIR in the official layout (+ our RGB encoder beside the decoder, + the LoRA adapter)."""
        if not self.dist.is_main:
            return
        trainee = self.trainee                   # (what DDP / FSDP wrap: distributed.unwrap(self.model) is it)
        transformer = merged_transformer(copy.deepcopy(trainee.transformer).cpu(),
                                         self.out / LORA_DIR if self.s.lora_rank else None)
        m = self.modules
        config = dataclasses.replace(self.config, refiner_looks=0)
        modules = (transformer, copy.deepcopy(m.gbuffer_encoder).cpu(), copy.deepcopy(m.decoder).cpu(), m.bank)
        pipe = FlashPipeline(config, *modules, "cpu", torch.float32)
        if self.s.refiner:
            settings = RefinerSettings(windows=self.s.refiner_windows, window_frames=self.s.refiner_frames,
                                       steps=self.s.refiner_steps, seed=self.s.seed)
            recs = self.refiner_data()
            refiner, _ = fit_refiner(pipe, recs, self.refiner_looks(recs), settings, self.out)
            config = dataclasses.replace(config, refiner_looks=refiner.looks, refiner_hidden=settings.hidden)
            pipe = FlashPipeline(config, *modules, "cpu", torch.float32, refiner)
        pipe.save(self.out)
        if m.rgb_encoder is not None:
            save_codec(m.rgb_encoder.cpu(), self.out, {"trained_with": "train"})

