"""The studio: schedules and timeline, rollout loop, REST API, UI and CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("alaya-studio")       # pyproject.toml is the one place the version is written
except PackageNotFoundError:                    # a source tree run without `pip install -e .`
    __version__ = "0+unknown"
