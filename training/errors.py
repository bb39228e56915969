"""The one error type of training and evaluation: a user mistake, reported in one line (exit 2 on the CLI)."""

from alaya_errors import UserError


class TrainingError(UserError):
    """Bad training input: a recording without RGB, an empty dataset, a prompt file, a weights or output dir."""
