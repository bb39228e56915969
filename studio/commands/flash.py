"""`alaya-studio flash init-random DIR | info DIR | inspect DIR | embed DIR PROMPT...`: the flash renderer's weights."""

from __future__ import annotations

import json
from pathlib import Path

from alaya_errors import UserError


def register(sub) -> None:
    p = sub.add_parser("flash", help="AlayaRenderer-Flash weights: random init, info, prompt embeddings")
    fsub = p.add_subparsers(dest="flash_command", metavar="ACTION")

    init = fsub.add_parser("init-random", help="write random weights in the official layout")
    init.add_argument("dir", type=Path)
    init.add_argument("--config", default="tiny", help="tiny (tests, CPU) or full (1.3B, ~2.6 GB bf16)")
    init.add_argument("--seed", type=int, default=0)
    init.add_argument("--prompt", action="append", default=[], help="extra prompt to put in the text cache")
    init.add_argument("--force", action="store_true", help="write into a non-empty directory")
    init.set_defaults(func=run_init_random)

    info = fsub.add_parser("info", help="config, parameter counts and files of a weights directory")
    info.add_argument("dir", type=Path)
    info.set_defaults(func=run_info)

    insp = fsub.add_parser("inspect", help="check a weights directory from its headers: exit 0 if it would load",
                           description="Reads only safetensors headers and config.json (never tensor data) and "
                                       "reports, per file, tensors, bytes, dtypes, a key tree, the verdict against "
                                       "this code and the model card's size. Exit 0 when DIR would load, 2 otherwise.")
    insp.add_argument("dir", type=Path)
    insp.add_argument("--json", action="store_true", help="print the report as JSON (attach it to a bug report)")
    insp.add_argument("--probe", type=Path, metavar="WINDOW.npy",
                      help="also load DIR, render this window and score both decoder alignments")
    insp.add_argument("--prompt", help="prompt for --probe (default: the first cached one)")
    insp.add_argument("--device", help="device for --probe (default: cuda when available)")
    insp.set_defaults(func=run_inspect)

    embed = fsub.add_parser("embed", help="encode prompts with umT5 into the directory's text cache")
    embed.add_argument("dir", type=Path)
    embed.add_argument("prompts", nargs="+")
    embed.add_argument("--text-encoder", required=True, type=Path, help="a local Wan 2.1 diffusers directory")
    embed.set_defaults(func=run_embed)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def run_init_random(args) -> int:
    from renderer.flash.config import get_config
    from renderer.flash.pipeline import FlashPipeline

    config = get_config(args.config)
    if args.dir.exists() and (not args.dir.is_dir() or (any(args.dir.iterdir()) and not args.force)):
        raise UserError("exists and is not an empty directory (use --force to write into it)", str(args.dir))
    pipe = FlashPipeline.random(config, seed=args.seed, prompts=args.prompt, device="cpu")
    pipe.save(args.dir)
    print(f"wrote random '{config.name}' weights ({sum(pipe.parameter_counts().values()):,} parameters, "
          f"{len(pipe.prompts.cached)} cached prompts) to {args.dir}")
    return 0


def run_info(args) -> int:
    from renderer.flash.pipeline import FlashPipeline

    pipe = FlashPipeline.from_dir(args.dir, device="cpu")
    files = {str(p.relative_to(args.dir)): p.stat().st_size for p in sorted(args.dir.rglob("*")) if p.is_file()}
    print(json.dumps({"config": pipe.config.to_json(), "parameters": pipe.parameter_counts(),
                      "cached_prompts": len(pipe.prompts.cached), "files": files}, indent=2))
    return 0


def run_inspect(args) -> int:
    from renderer.flash.inspect import render_text
    from renderer.flash.weights import WeightsPlan

    plan = WeightsPlan(args.dir)
    report = plan.report()
    if args.probe is not None:
        report["probe"] = _probe(args, plan)
    print(json.dumps(report, indent=2) if args.json else render_text(report))
    return 0 if plan.ok else 2


def _probe(args, plan) -> dict:
    from renderer.flash.pipeline import FlashPipeline
    from renderer.flash.probe import load_window, probe_alignment

    window = load_window(args.probe)
    if not plan.ok:
        return {"error": "not run: the directory does not load"}
    pipe = FlashPipeline.from_dir(args.dir, device=args.device)
    return probe_alignment(pipe, window, args.prompt)


def run_embed(args) -> int:
    from renderer.flash.pipeline import FlashPipeline
    from renderer.flash.text import CACHE_FILE, save_cache

    pipe = FlashPipeline.from_dir(args.dir, device="cpu", text_encoder=args.text_encoder)
    for text in args.prompts:
        pipe.prompts.prompt(text)
    save_cache(args.dir / CACHE_FILE, pipe.prompts.cached)
    print(f"{len(args.prompts)} prompt(s) embedded; cache holds {len(pipe.prompts.cached)}")
    return 0
