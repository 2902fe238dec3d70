"""The Django project: operator console, settings and the engine's management commands."""
