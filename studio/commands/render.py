"""`alaya-studio render` (placeholder until its issue lands: prints that it is not available yet)."""

from alaya_errors import UserError


def register(sub) -> None:
    p = sub.add_parser("render", help="(not available yet)")
    p.set_defaults(func=run)


def run(args) -> int:
    raise UserError("'render' is not available in this build yet")
