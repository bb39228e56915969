"""The studio: schedules and timeline, rollout loop, REST API, UI and CLI."""
