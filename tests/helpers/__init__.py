"""Helpers shared by several test files (import as `from helpers.NAME import ...`; pytest puts tests/ on the path)."""
