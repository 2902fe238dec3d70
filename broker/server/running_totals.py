"""The broker's put and get totals, kept across restarts in ``<store>/config/brokerStats.json``.

RocketMQ's totals (``msgPutTotalTodayNow``…) start again at 0 with the broker, so whatever a
monitor did not read between its last sample and a stop is lost to it, and "today" reads as "since
the restart". Here the totals count from the broker's first start: the file is rewritten every
second (without fsync: a process kill keeps the page cache, so it loses at most the last second;
a machine crash may lose the last few seconds the kernel had not written back) and at a clean
stop, and read at start. The day's morning totals are resumed only for the same UTC day: a file
of an earlier day means every count in it is of an earlier day.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from broker.common.atomic_file import replace_atomically

log = logging.getLogger(__name__)

FILE_NAME = "brokerStats.json"
MAX_FILE_BYTES = 4096  # eight integers and a date: anything larger is not ours


@dataclass
class RunningTotals:
    put_total: int = 0
    get_total: int = 0
    since_ms: int = 0  # when the totals started counting (the broker's first start)
    day: str = ""  # the UTC day of the mornings below, ISO
    put_today_morning: int = 0
    put_yesterday_morning: int = 0
    get_today_morning: int = 0
    get_yesterday_morning: int = 0


def utc_today() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


def totals_file(config_dir: Path | str) -> Path:
    return Path(config_dir) / FILE_NAME


def load(path: Path) -> RunningTotals | None:
    """The saved totals; None without a file, or with one that is unreadable or not ours (the
    totals then count from zero, as after a first start)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("%s not readable, the put and get totals start at 0: %s", path, exc)
        return None
    try:
        if len(raw) > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
        fields = orjson.loads(raw)
        totals = RunningTotals(**{key: fields[key] for key in asdict(RunningTotals())})
        numbers = [v for k, v in asdict(totals).items() if k != "day"]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in numbers):
            raise ValueError("a total is not a non-negative integer")
        datetime.date.fromisoformat(totals.day)
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("%s is not a totals file, the put and get totals start at 0: %s", path, exc)
        return None
    return totals


def save(path: Path, totals: RunningTotals) -> None:
    replace_atomically(path, orjson.dumps(asdict(totals)), sync=False)
