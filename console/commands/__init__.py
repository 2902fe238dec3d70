"""The console's command layer: every operator action is one function here (``@command``), run
only through ``boundary.execute`` — the one permission check and the one audit record — by the
pages, the htmx fragments and the ``console_command`` management command alike."""

from core.boundary import (
    COMMANDS,
    FAILURES,
    Actor,
    Cluster,
    Invalid,
    Outcome,
    Params,
    Refused,
    command,
    execute,
    serves,
)

__all__ = [
    "COMMANDS",
    "FAILURES",
    "Actor",
    "Cluster",
    "Invalid",
    "Outcome",
    "Params",
    "Refused",
    "command",
    "execute",
    "serves",
]
