"""The live studio server: FastAPI app factory, REST routes, sessions, engine feed endpoint."""

from studio.server.app import create_app
from studio.server.settings import Settings

__all__ = ["Settings", "create_app"]
