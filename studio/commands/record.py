"""`alaya-studio record` (placeholder until its issue lands: prints that it is not available yet)."""

from alaya_errors import UserError


def register(sub) -> None:
    p = sub.add_parser("record", help="(not available yet)")
    p.set_defaults(func=run)


def run(args) -> int:
    raise UserError("'record' is not available in this build yet")
