"""The rates a RocketMQ broker reports: put and get TPS in its runtime info (``putTps``,
``getTransferedTps``…, what ``clusterList`` and the console show as in/out TPS), and each
consumer group's consume TPS in its consume stats.

Counters only grow; they are sampled once a second, and a rate is the growth between the newest
sample and one taken a number of samples earlier, as RocketMQ's store statistics do: the
runtime-info figures are over the last 10 s, minute and 10 minutes, empty while the broker is
younger than the window. A group's consume TPS is its committed offsets' progress over the last
minute (what it consumed, as its consumers report it), sampled every 10 s: pulls say what a
consumer fetched, not what it finished, and a slow consumer fetches a thousand messages once and
then works through them for minutes. The put and get totals are also noted at each UTC midnight
(RocketMQ's BrokerStats: ``msgPutTotalTodayMorning``…), so a day's in and out counts can be told
(``clusterList -m``). Unlike RocketMQ's, the totals and the mornings go on across restarts
(``running_totals``): they count from the broker's first start.
"""

from __future__ import annotations

import datetime
import time
from collections import defaultdict, deque

from .running_totals import RunningTotals, utc_today

RUNTIME_WINDOWS_S = (10, 60, 600)
GROUP_SAMPLE_EVERY = 10  # one group sample every 10 store samples (10 s)
GROUP_SAMPLES_KEPT = 7  # a minute between the oldest and the newest


class CounterSamples:
    """``(time, running total)`` snapshots of one counter, the newest ``keep`` of them."""

    def __init__(self, keep: int) -> None:
        self.samples: deque[tuple[float, int]] = deque(maxlen=keep)

    def add(self, now_s: float, total: int) -> None:
        self.samples.append((now_s, total))

    def rate(self, back: int) -> float | None:
        """Per second, between the newest snapshot and the one ``back`` before it; None while
        fewer are kept."""
        if len(self.samples) <= back:
            return None
        return _rate(self.samples[-1 - back], self.samples[-1])

    def rate_over_all(self) -> float:
        """Per second, between the oldest snapshot kept and the newest (0 with fewer than two)."""
        if len(self.samples) < 2:
            return 0.0
        return _rate(self.samples[0], self.samples[-1])


def _rate(begin: tuple[float, int], end: tuple[float, int]) -> float:
    elapsed = end[0] - begin[0]
    return (end[1] - begin[1]) / elapsed if elapsed > 0 else 0.0


class BrokerStats:
    """Fed by consumers' offset commits (``on_committed``) and sampled once a second (``sample``);
    the store's own counters (puts, transferred messages, found and missed reads) are read at each
    sample."""

    def __init__(self, store) -> None:
        self.store = store
        keep = max(RUNTIME_WINDOWS_S) + 1
        self._put, self._found = CounterSamples(keep), CounterSamples(keep)
        self._miss, self._transferred = CounterSamples(keep), CounterSamples(keep)
        # (topic, group) → messages its committed offsets advanced by, all queues, since it was seen
        self.group_consumed: dict[tuple[str, str], int] = defaultdict(int)
        # (topic, group, queue id) → the highest offset (within the queue) the group committed
        self._high_water: dict[tuple[str, str, int], int] = {}
        self._group_samples: dict[tuple[str, str], CounterSamples] = {}
        self._unsampled: set[tuple[str, str]] = set()  # progress since the last sample, first time
        self._samples_taken = 0
        self.daily = DailyTotals(utc_today())
        # The totals before this start (``resume``): the store's own counters start at 0.
        self.put_before = self.get_before = 0
        self.since_ms = int(time.time() * 1000)

    @property
    def put_total(self) -> int:
        return self.put_before + self.store.put_count

    @property
    def get_total(self) -> int:
        return self.get_before + self.store.get_count

    def resume(self, saved: RunningTotals, today: datetime.date) -> None:
        """Go on from the totals a previous run saved (before any sample of this run)."""
        self.put_before, self.get_before, self.since_ms = saved.put_total, saved.get_total, saved.since_ms
        self.daily.resume(saved, today)

    def totals(self) -> RunningTotals:
        """What to save for the next start."""
        daily = self.daily
        return RunningTotals(
            self.put_total,
            self.get_total,
            self.since_ms,
            daily.day.isoformat(),
            daily.put_today_morning,
            daily.put_yesterday_morning,
            daily.get_today_morning,
            daily.get_yesterday_morning,
        )

    def on_committed(self, topic: str, group: str, queue_id: int, previous: int, offset: int) -> None:
        """A consumer of ``group`` committed ``offset`` on queue ``queue_id`` of ``topic`` that held
        ``previous`` (-1: none). Only real progress is consumption: a group's first offset says
        where it starts (the queue's end, for a new group), one moved back is a reset, and a commit
        counts only up to the queue's end and from the highest offset the group reached there
        before, so commits alone (forward and back again, or far past the end) never count more
        messages than the queue holds."""
        mark_key = (topic, group, queue_id)
        reached = min(offset, self.store.get_max_offset_in_queue(topic, queue_id))
        mark = self._high_water.get(mark_key, -1)
        # From the offset held too: an operator's reset forward (not a commit) is no consumption.
        counted_from = max(mark, previous)
        if previous >= 0 and counted_from < reached:
            key = (topic, group)
            if key not in self.group_consumed:
                self._unsampled.add(key)
            self.group_consumed[key] += reached - counted_from
        if reached > mark:
            self._high_water[mark_key] = reached

    def sample(self, now_s: float, today: datetime.date | None = None) -> None:
        store = self.store
        self.daily.note(today or utc_today(), self.put_total, self.get_total)
        self._put.add(now_s, self.put_total)
        self._found.add(now_s, store.get_found_count)
        self._miss.add(now_s, store.get_miss_count)
        self._transferred.add(now_s, self.get_total)
        # A group's first progress is sampled at once, so its first rate comes 10 s later.
        every_group = self._samples_taken % GROUP_SAMPLE_EVERY == 0
        keys, self._unsampled = list(self.group_consumed) if every_group else self._unsampled, set()
        for key in keys:
            samples = self._group_samples.get(key)
            if samples is None:
                samples = self._group_samples[key] = CounterSamples(GROUP_SAMPLES_KEPT)
            samples.add(now_s, self.group_consumed[key])
        self._samples_taken += 1

    def consume_tps(self, group: str, topic: str) -> float:
        """Messages a second ``group`` consumed of ``topic`` (its committed offsets' progress) over
        about the last minute."""
        samples = self._group_samples.get((topic, group))
        return samples.rate_over_all() if samples else 0.0

    def forget_group(self, group: str) -> None:
        for key in [key for key in self.group_consumed if key[1] == group]:
            del self.group_consumed[key]
            self._unsampled.discard(key)
            self._group_samples.pop(key, None)
        for mark_key in [mark_key for mark_key in self._high_water if mark_key[1] == group]:
            del self._high_water[mark_key]

    def runtime_info(self) -> dict[str, str]:
        """RocketMQ's rate entries: three figures (10 s, 1 min, 10 min) joined by spaces, each
        empty until the broker has run that long; ``getTotalTps`` counts 0 instead."""
        info = {
            "putTps": _figures(self._put),
            "getFoundTps": _figures(self._found),
            "getMissTps": _figures(self._miss),
            "getTransferedTps": _figures(self._transferred),
        }
        totals = []
        for window in RUNTIME_WINDOWS_S:
            found, miss = self._found.rate(window), self._miss.rate(window)
            totals.append(repr((found or 0.0) + (miss or 0.0)))
        info["getTotalTps"] = " ".join(totals)
        # Not a RocketMQ figure: how long msgPutTotalTodayNow/msgGetTotalTodayNow have counted. A
        # monitor that sees them go down tells a lost totals file (counting from zero for less than
        # its sampling interval) from a killed broker's last unsaved second (counting for longer).
        counted_ms = max(0, int(time.time() * 1000) - self.since_ms)
        info["msgTotalCountedSeconds"] = str(counted_ms // 1000)
        info["msgPutTotalTodayNow"] = str(self.put_total)
        info["msgGetTotalTodayNow"] = str(self.get_total)
        return info | self.daily.runtime_info()


class DailyTotals:
    """The put and get totals as they stood at the start of today and of yesterday (UTC
    midnight). Like RocketMQ's, both are 0 until the broker has counted through a midnight: today's
    count is then everything since it first started."""

    def __init__(self, today: datetime.date) -> None:
        self.day = today
        self.put_today_morning = self.put_yesterday_morning = 0
        self.get_today_morning = self.get_yesterday_morning = 0

    def resume(self, saved: RunningTotals, today: datetime.date) -> None:
        """The mornings a previous run saved: as saved on the same day; from a day before, the
        saved totals were all counted by this morning (and, from yesterday, its morning is the
        saved today's)."""
        day = datetime.date.fromisoformat(saved.day)
        self.day = today
        if day == today:
            self.put_today_morning, self.put_yesterday_morning = (
                saved.put_today_morning,
                saved.put_yesterday_morning,
            )
            self.get_today_morning, self.get_yesterday_morning = (
                saved.get_today_morning,
                saved.get_yesterday_morning,
            )
        elif day == today - datetime.timedelta(days=1):
            self.put_yesterday_morning, self.put_today_morning = saved.put_today_morning, saved.put_total
            self.get_yesterday_morning, self.get_today_morning = saved.get_today_morning, saved.get_total
        else:  # nothing was counted yesterday
            self.put_yesterday_morning = self.put_today_morning = saved.put_total
            self.get_yesterday_morning = self.get_today_morning = saved.get_total

    def note(self, today: datetime.date, put_total: int, get_total: int) -> None:
        """Called with the running totals at each sample: a new day moves the mornings along."""
        if today == self.day:
            return
        self.day = today
        self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, put_total
        self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, get_total

    def runtime_info(self) -> dict[str, str]:
        return {
            "msgPutTotalYesterdayMorning": str(self.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self.put_today_morning),
            "msgGetTotalYesterdayMorning": str(self.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.get_today_morning),
        }


def _figures(samples: CounterSamples) -> str:
    rates = (samples.rate(window) for window in RUNTIME_WINDOWS_S)
    return " ".join("" if rate is None else repr(rate) for rate in rates)
