"""The flash renderer's settings as one pydantic model: light to import (no torch model stack), so the CLI and the
server can check options before anything loads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from renderer.flash.config import TEMPORAL_SCALE, InputRange, SamplerUpdate

# settings that override the weights' own FlashConfig (sampler as data, codec alignment and input range)
CONFIG_OVERRIDES = ("num_steps", "timestep_shift", "sigma_max", "sampler_update", "trim_startup_frames",
                    "gbuffer_input_range")


class FlashSettings(BaseModel):
    """The flash renderer's options (create_renderer("flash", ...), CLI and server settings); None = the
    weights' own config."""

    model_config = ConfigDict(extra="forbid")

    chunk_size: int | None = Field(None, ge=TEMPORAL_SCALE)
    num_steps: int | None = Field(None, ge=1)
    timestep_shift: float | None = Field(None, gt=0)
    sigma_max: float | None = Field(None, gt=0, le=1)
    sampler_update: SamplerUpdate | None = None
    trim_startup_frames: bool | None = None
    gbuffer_input_range: InputRange | None = None
    recache_on_switch: bool = False
    text_encoder: str | None = None
    unknown_prompt: Literal["error", "presets"] = "error"
    seed: int = 0
    prompts: list[str] | None = None
    # torch's intra-op CPU threads for the whole process (None: torch's default, one per core). On a shared
    # 2-core machine two threads wait on each other and on the encoder: 1 is faster (BENCHMARKS.md, flash live)
    threads: int | None = Field(None, ge=1)
    # a live session finishes each chunk (decoder, refiner) on a second thread while the next chunk's steps run,
    # on a CPU: more frames per second where one core cannot keep the stream's rate, at some latency (the two
    # halves slow each other); BENCHMARKS.md, flash live
    overlap_chunks: bool = False

    @field_validator("chunk_size")
    @classmethod
    def _whole_latents(cls, v: int | None) -> int | None:
        if v is not None and v % TEMPORAL_SCALE:
            raise ValueError(f"must be a positive multiple of {TEMPORAL_SCALE}, got {v}")
        return v

    def config_overrides(self) -> dict:
        return {k: getattr(self, k) for k in CONFIG_OVERRIDES if getattr(self, k) is not None}
