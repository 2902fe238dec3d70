"""Bits of a PULL_MESSAGE request's ``sysFlag`` (RocketMQ's PullSysFlag)."""

from __future__ import annotations

FLAG_COMMIT_OFFSET = 0x1  # the request carries the group's committed offset for this queue
FLAG_SUSPEND = 0x2  # hold the pull (long polling) when nothing is there yet
FLAG_SUBSCRIPTION = 0x4  # the request carries its own subscription expression
FLAG_CLASS_FILTER = 0x8  # RocketMQ's retired class filter; never set by our clients
FLAG_LITE_PULL = 0x10  # a lite pull consumer's request


def build_pull_sys_flag(
    commit_offset: bool,
    suspend: bool,
    subscription: bool,
    class_filter: bool = False,
    lite_pull: bool = False,
) -> int:
    return (
        (FLAG_COMMIT_OFFSET if commit_offset else 0)
        | (FLAG_SUSPEND if suspend else 0)
        | (FLAG_SUBSCRIPTION if subscription else 0)
        | (FLAG_CLASS_FILTER if class_filter else 0)
        | (FLAG_LITE_PULL if lite_pull else 0)
    )
