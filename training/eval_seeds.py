"""One demonstration over several training seeds: `alaya-studio eval seeds RUN.json... --seeds 0,1,2`.

A single training run says little: two retrainings of the same recipe have moved a style by 6 dB (issue 46). Each
training seed is scored on its own (`alaya-studio eval ... --json`); this module folds those runs into one result:
- `training_seeds`: one entry per run, its figures without the per-recording lists;
- the top-level figures: the mean over the runs of every number they all report;
- `range`: the same tree holding [min, max] of each of those numbers.

The runs must be comparable, or the mean means nothing: the same held-out recordings, styles, frames and noise
seeds. Anything else is refused with one line naming the difference.
"""

from __future__ import annotations

from statistics import fmean

from training.errors import TrainingError

# What must match between runs for their mean to be a figure of one recipe.
MUST_MATCH = ("held_out_recordings", "styles")
# Per-recording and per-item lists: kept in each run's own JSON, not repeated here.
LISTS_LEFT_OUT = "recordings, per_prompt, noise_seeds.per_seed and the per-item lists of prompt_control"


def merge_seed_runs(runs: list[dict], seeds: list[int], names: list[str] | None = None) -> dict:
    """`runs[i]` is an eval result of the model trained with `seeds[i]`; `names[i]` where it came from."""
    names = names or [f"run {i + 1}" for i in range(len(runs))]
    if len(runs) < 2:
        raise TrainingError("needs the results of at least two training seeds", "eval seeds")
    if len(seeds) != len(runs):
        raise TrainingError(f"{len(seeds)} seeds for {len(runs)} results: give one seed per result", "--seeds")
    if len(set(seeds)) != len(seeds):
        raise TrainingError(f"a training seed is given twice: {seeds}", "--seeds")
    for run, name in zip(runs, names):
        if not isinstance(run, dict) or not isinstance(run.get("overall"), dict):
            raise TrainingError("is not an alaya-studio eval result (no 'overall')", name)
    first = runs[0]
    for run, name in zip(runs[1:], names[1:]):
        for key in MUST_MATCH:
            if run.get(key) != first.get(key):
                raise TrainingError(f"{key} differ from {names[0]}'s: {run.get(key)} against {first.get(key)}", name)
        for read, label in ((_frames, "frames scored"), (_noise_seeds, "noise seeds")):
            if read(run) != read(first):
                raise TrainingError(f"{label} differ from {names[0]}'s: {read(run)} against {read(first)}", name)
    entries = [{"seed": seed, "result": name, **_figures(run)} for run, seed, name in zip(runs, seeds, names)]
    mean, spread = _fold([_figures(run) for run in runs])
    merged = {
        "what": f"mean over {len(runs)} training seeds of the figures each seed's eval reports (range: [min, max]); "
                f"left out here: {LISTS_LEFT_OUT}",
        "held_out_recordings": first.get("held_out_recordings"),
        "styles": first.get("styles"),
        "frames": _frames(first),
        "noise_seeds": _noise_seeds(first),
        **mean,
        "range": spread,
        "training_seeds": entries,
    }
    return merged


def _frames(run: dict):
    return run["overall"].get("frames")


def _noise_seeds(run: dict):
    return (run.get("noise_seeds") or {}).get("seeds")


def _figures(run: dict) -> dict:
    """The run without its lists (they are per recording or per item) and without what names its files."""
    return {k: _prune(v) for k, v in run.items()
            if k not in ("recordings", "per_prompt", "held_out_recordings", "styles", "weights")
            and not isinstance(v, list)}


def _prune(value):
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if not isinstance(v, list) and k != "per_seed"}
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fold(trees: list) -> tuple[dict, dict]:
    """(mean, range): every number all trees hold at the same place, averaged and as [min, max]; text kept in the
    mean where all agree; the rest dropped."""
    mean: dict = {}
    spread: dict = {}
    for key, value in trees[0].items():
        values: list = [t.get(key) for t in trees]
        if all(isinstance(v, dict) for v in values):
            inner, inner_spread = _fold(values)
            if inner:
                mean[key] = inner
            if inner_spread:
                spread[key] = inner_spread
        elif all(_is_number(v) for v in values):
            mean[key] = round(fmean(values), 4)
            spread[key] = [round(min(values), 4), round(max(values), 4)]
        elif all(v == value for v in values):
            mean[key] = value
    return mean, spread
