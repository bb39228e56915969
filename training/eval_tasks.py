"""What an evaluation runs over: its options, the tasks (the prompt asked, the style scored) per held-out
recording, the model's frames streamed as a live session would, and the training recordings a baseline is fitted
on. Shared by the evaluation (training/eval_run.py) and its ablations (training/ablations.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from prompt_presets.presets import find_preset
from training.bookkeeping import SETTINGS_FILE, read_settings
from training.data import DEFAULT_PROMPT, prompt_for
from training.errors import TrainingError
from training.style_targets import ORIGINAL

if TYPE_CHECKING:
    from training.codec import Perceptual
    from training.reference_metrics import ClipScorer, I3dFeatures

FIT_FRAMES = 200              # frames per training recording the per-pixel map is fitted on (evenly spaced)
BLOCK = 16                    # frames predicted / rendered as targets at a time
SPREAD_KEYS = ("psnr", "ssim", "flicker")
EIGHT_WORLDS = "eight_worlds"


@dataclass
class EvalOptions:
    weights: str
    recordings: list[str]
    styles: list[str] | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    size: tuple[int, int] | None = None
    frames: int | None = None
    baselines: bool = False
    fit: list[str] | None = None                 # None: the recordings the weights were trained on
    codec: str | None = None                     # None: the weights' own RGB codec, where they have one
    noise_seeds: int = 1
    seed: int = 0
    device: str | None = None
    lpips: Perceptual | None = None
    clip: ClipScorer | None = None
    i3d: I3dFeatures | None = None
    fvd_clip_frames: int = 16
    side_by_side: Path | None = None
    paraphrases: bool = True
    paraphrase_frames: int = 32
    eight_worlds: bool = True
    rollout_frames: int | None = None            # None: the whole schedule (637 frames)
    renderer_options: dict = field(default_factory=dict)   # FlashSettings for the model under test (num_steps=2)
    conv_minutes: float = 10.0                   # the conv baseline's fitting budget (training/conv_baseline.py)
    ablation_guide_minutes: float | None = None  # no_transformer's guide refit; None: the model's own refit's


@dataclass(frozen=True)
class Task:
    key: str                  # what JSON and tables call it: the preset name, else the prompt text
    prompt: str               # what the renderer is asked for
    target: str               # the style whose frames it is scored against


def tasks_for(path: Path, o: EvalOptions) -> list[Task]:
    if o.styles:
        return [Task(s, s, s) for s in o.styles]
    chosen = o.prompts.get(path.name, o.prompts.get("*", DEFAULT_PROMPT))
    preset = find_preset(chosen)
    return [Task(preset.name if preset else prompt_for(path, o.prompts), chosen, ORIGINAL)]


def render_stream(renderer, source, schedule, seed: int, limit: int | None = None) -> Iterator:
    """The rendered frames (timeline.rollout.RenderedFrame) of `source` under `schedule`, as a live session."""
    from timeline.rollout import Rollout

    source.seek(0)
    with renderer.open_session(source.width, source.height, seed=seed) as session:
        rollout, done = Rollout(source, schedule, session), 0
        while limit is None or done < limit:
            chunk = rollout.next_chunk()
            if not chunk:
                break
            for rendered in chunk[: None if limit is None else limit - done]:
                yield rendered
                done += 1


def named_training_recordings(weights: str) -> list[str]:
    """The recordings `alaya-studio train` names in WEIGHTS_DIR/train_settings.json ([] when none are named)."""
    names = read_settings(weights).get("recordings")
    return [str(n) for n in names] if isinstance(names, list) else []


def training_recordings(weights: str) -> list[str]:
    """The per-pixel baseline's default fit: the model's own training recordings."""
    names = named_training_recordings(weights)
    if not names:
        raise TrainingError("the weights do not name their training recordings (no 'recordings' in "
                            f"{SETTINGS_FILE}): give the per-pixel baseline's --fit RECORDING...", str(weights))
    missing = [n for n in names if not Path(n).exists()]
    if missing:
        raise TrainingError(f"training recording {missing[0]} is not there: give --fit RECORDING...", "--fit")
    return names
