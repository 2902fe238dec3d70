"""Client version numbers as RocketMQ names them (``MQVersion.Version`` ordinals → ``V4_9_4``)."""

from __future__ import annotations

# From V4_0_0_SNAPSHOT (ordinal 212) RocketMQ's version enum is regular: for every a.b.c a
# SNAPSHOT entry then the release, c and b running 0..9. Older 3.x ordinals are irregular and
# only ever reported by clients nobody runs any more, so they are shown as raw numbers.
_V4_0_0_SNAPSHOT = 212


def version_desc(version: int) -> str:
    if version < _V4_0_0_SNAPSHOT:
        return str(version)
    index, release = divmod(version - _V4_0_0_SNAPSHOT, 2)
    major = 4 + index // 100
    if major > 9:
        return "HIGHER_VERSION"
    name = f"V{major}_{(index // 10) % 10}_{index % 10}"
    return name if release else f"{name}_SNAPSHOT"
