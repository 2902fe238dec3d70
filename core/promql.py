"""PromQL over the families the console exports at ``/metrics``, shared by the pages that write
it (the alerts app's Prometheus rule file, the console's Grafana dashboard)."""

from __future__ import annotations

from django.conf import settings


def change_over(series: str, window: str, rises_only: bool = False) -> str:
    """The console's change over a window (``history.readings.Readings.change_over``) in PromQL;
    the alerts app's exported rules and the console's Grafana dashboard (its dead-letter panel) say it so.

    ``last_over_time(s[W])`` is the newest scraped figure of the last W whatever scrapes in between
    lacked the group: a range selector skips the stale marker a scrape without the series leaves,
    where a bare ``s`` has no value for that scrape and the alert would resolve and fire again
    (the weakness the console rules had). ``delta`` is not used: it takes the first and last
    samples inside the window only, extrapolated to its edges, so a missed scrape at the start
    shortens what it compares, and for dead letters a fall (retention deleting some) cancels
    arrivals anywhere in the window.

    Net change (``rises_only`` False, lag growing): the console adds each point's step since the
    group's previous point, which telescopes to its newest figure in the window minus its newest
    figure before it, at most a window older: ``last_over_time(s[W]) - last_over_time(s[W]
    offset W)``. One difference: a group with no figure in the window before (new within the
    window) has no value here, where the console counts its steps from its first figure; stable
    PromQL has no "first sample of a range".

    Rises only (dead letters): PromQL has no "sum of positive changes" of a gauge (``increase``
    takes a fall for a counter reset and adds the whole new value; the DLQ topic's written count
    ``rocketmq_topic_messages_total`` is born with the topic, at the first dead letter, so ``increase``
    of it misses that first batch). So a subquery steps through the window at the console's
    sampling interval S: each step adds ``max(0, x(t) - x(t - S))`` with ``x`` the newest figure
    of the W before, i.e. what the count rose by since the step before, counted at the first step
    that sees it (a missed scrape holds ``x``, the rise is counted when it shows). A rise and a
    fall within one step net out, as within one console cycle. Prometheus 2.x ranges include their
    left edge (a subquery point at exactly ``now - W``: one step more than the console); 3.x's,
    like the console's windows, do not. The rule's ``>`` binds looser than ``-``, so it compares
    the whole difference.
    """
    newest = f"last_over_time({series}[{window}])"
    if not rises_only:
        return f"{newest} - last_over_time({series}[{window}] offset {window})"
    step = f"{settings.HISTORY_SAMPLE_SECONDS}s"
    rise = f"clamp_min({newest} - last_over_time({series}[{window}] offset {step}), 0)"
    return f"sum_over_time({rise}[{window}:{step}])"
