"""`alaya-studio` console script: serve, render, record, engine, bench, flash, schedule, train, eval.

Each subcommand lives in `studio/commands/<name>.py` with `register(subparsers)`, which adds its parser and
sets `func`. User mistakes (`UserError`) print one line `error: ...` and exit with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from alaya_errors import UserError

COMMANDS = ("serve", "render", "record", "engine", "bench", "flash", "schedule", "train", "eval")
# Subcommands that parse their own arguments (`train RECORDING...` next to `train codec RECORDING...`).
OWN_ARGUMENTS = ("train",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="alaya-studio",
                                     description="Real-time generative world rendering studio.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"studio.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in OWN_ARGUMENTS:
        args = argparse.Namespace(command=argv[0], argv=argv[1:],
                                  func=importlib.import_module(f"studio.commands.{argv[0]}").run)
    else:
        args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
