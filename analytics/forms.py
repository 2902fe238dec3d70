"""Forms of the analytics pages: start a run, edit a schedule. Bad input gets a reason per field."""

from __future__ import annotations

import json
from typing import Any

from celery.schedules import crontab
from django import forms
from django.conf import settings
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from broker.common.topic_config import validate_topic

from .models import REPORT_CHOICES
from .tasks import RUN_SCHEDULED_REPORT


def parse_topics(raw: str) -> list[str]:
    topics = [t.strip() for t in raw.replace("\n", ",").split(",") if t.strip()]
    for topic in topics:
        reason = validate_topic(topic)
        if reason:
            raise forms.ValidationError(reason)
    return sorted(set(topics))


class TopicsField(forms.CharField):
    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", "comma-separated; empty = every topic")
        super().__init__(**kwargs)

    def clean(self, value):
        return parse_topics(super().clean(value) or "")


def _moment_input() -> forms.DateTimeInput:
    """The browser's date-and-time picker; the value it sends (2026-11-23T08:00) is what
    DateTimeField parses, and typed values like 2026-11-23 08:00 still are."""
    return forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class RunForm(forms.Form):
    report = forms.ChoiceField(choices=REPORT_CHOICES, initial="all")
    start_time = forms.DateTimeField(required=False, widget=_moment_input(),
                                     help_text="UTC; empty = from the first archived message")  # fmt: skip
    end_time = forms.DateTimeField(required=False, widget=_moment_input(),
                                   help_text="UTC, exclusive; empty = up to the last")  # fmt: skip
    topics = TopicsField()
    input_uri = forms.CharField(
        required=False,
        max_length=1024,
        label="Archive URI",
        help_text="directory or any URI Spark reads; empty = the configured archive",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["input_uri"].widget.attrs["placeholder"] = settings.ANALYTICS_ARCHIVE_URI

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        start, end = data.get("start_time"), data.get("end_time")
        if start and end and start >= end:
            raise forms.ValidationError("the time range is empty: the start must be before the end")
        data["input_uri"] = (data.get("input_uri") or "").strip() or settings.ANALYTICS_ARCHIVE_URI
        return data


# What a schedule can hold and run. A run covers at most ten years back (``now - window`` must stay
# a date: a window of 10**8 hours overflowed every run); an interval runs a Spark job at least once a
# year and at most every ANALYTICS_MIN_INTERVAL_SECONDS (a minute unless set lower). The crontab's
# fields are stored in columns of these lengths.
MAX_WINDOW_HOURS = 87_600
PERIOD_SECONDS = {IntervalSchedule.SECONDS: 1, IntervalSchedule.MINUTES: 60, IntervalSchedule.HOURS: 3600,
                  IntervalSchedule.DAYS: 86_400}  # fmt: skip
MAX_INTERVAL_SECONDS = 366 * 86_400
CRONTAB_COLUMNS = (("minute", "minute"), ("hour", "hour"), ("day-of-month", "day_of_month"),
                   ("month", "month_of_year"), ("day-of-week", "day_of_week"))  # fmt: skip

PERIODS = [(p, p) for p in (IntervalSchedule.SECONDS, IntervalSchedule.MINUTES, IntervalSchedule.HOURS,
                             IntervalSchedule.DAYS)]  # fmt: skip


class ScheduleForm(forms.Form):
    name = forms.CharField(max_length=PeriodicTask._meta.get_field("name").max_length)
    report = forms.ChoiceField(choices=REPORT_CHOICES, initial="all")
    topics = TopicsField()
    window_hours = forms.IntegerField(
        min_value=0,
        max_value=MAX_WINDOW_HOURS,
        initial=24,
        label="Window (hours)",
        help_text=f"each run covers the last N hours, at most {MAX_WINDOW_HOURS} (ten years); 0 = everything",
    )
    every = forms.IntegerField(
        min_value=1,
        max_value=MAX_INTERVAL_SECONDS,
        required=False,
        help_text="run every N periods, from a minute to a year …",
    )
    period = forms.ChoiceField(choices=PERIODS, initial=IntervalSchedule.HOURS, required=False)
    crontab = forms.CharField(
        required=False,
        max_length=100,
        help_text="… or a crontab 'minute hour day-of-month month day-of-week' (UTC)",
    )
    input_uri = forms.CharField(
        required=False, max_length=1024, label="Archive URI", help_text="empty = the configured archive"
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args, instance: PeriodicTask | None = None, **kwargs):
        self.instance = instance
        super().__init__(*args, **kwargs)

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        clash = PeriodicTask.objects.filter(name=name)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise forms.ValidationError("a schedule with this name exists")
        return name

    def clean_crontab(self):
        raw = " ".join(self.cleaned_data.get("crontab", "").split())
        if raw and len(raw.split()) != 5:
            raise forms.ValidationError("a crontab has 5 fields: minute hour day-of-month month day-of-week")
        if raw:
            for (label, column), value in zip(CRONTAB_COLUMNS, raw.split(), strict=True):
                limit = CrontabSchedule._meta.get_field(column).max_length
                if len(value) > limit:
                    raise forms.ValidationError(f"the {label} field is longer than {limit} characters")
            minute, hour, day_of_month, month, day_of_week = raw.split()
            try:  # celery's own parser: what it accepts is what beat will run
                crontab(minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month,
                        day_of_week=day_of_week)  # fmt: skip
            except ValueError as exc:
                raise forms.ValidationError(f"invalid crontab: {exc}") from exc
        return raw

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        if bool(data.get("every")) == bool(data.get("crontab")):
            raise forms.ValidationError("give either an interval (every N periods) or a crontab, not both")
        if data.get("every") and not data.get("period"):
            raise forms.ValidationError("choose the interval's period")
        if data.get("every") and data.get("period"):
            seconds = data["every"] * PERIOD_SECONDS[data["period"]]
            shortest = settings.ANALYTICS_MIN_INTERVAL_SECONDS
            if seconds < shortest:
                raise forms.ValidationError(f"the interval must be at least {shortest} seconds")
            if seconds > MAX_INTERVAL_SECONDS:
                raise forms.ValidationError("the interval must be at most a year (366 days)")
        return data

    def save(self) -> PeriodicTask:
        data = self.cleaned_data
        task = self.instance or PeriodicTask(task=RUN_SCHEDULED_REPORT)
        task.name = data["name"]
        task.enabled = data["enabled"]
        task.kwargs = json.dumps({
            "report": data["report"], "topics": data["topics"], "window_hours": data["window_hours"],
            "input_uri": (data.get("input_uri") or "").strip(), "schedule_name": data["name"],
        })  # fmt: skip
        if data.get("every"):
            task.interval, _ = IntervalSchedule.objects.get_or_create(
                every=data["every"], period=data["period"]
            )
            task.crontab = None
        else:
            minute, hour, day_of_month, month, day_of_week = data["crontab"].split()
            task.crontab, _ = CrontabSchedule.objects.get_or_create(
                minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month,
                day_of_week=day_of_week, timezone="UTC",
            )  # fmt: skip
            task.interval = None
        task.save()
        return task

    @classmethod
    def initial_from(cls, task: PeriodicTask) -> dict:
        kwargs = json.loads(task.kwargs or "{}")
        initial = {
            "name": task.name, "report": kwargs.get("report", "all"),
            "topics": ", ".join(kwargs.get("topics", [])),
            "window_hours": kwargs.get("window_hours", 0), "input_uri": kwargs.get("input_uri", ""),
            "enabled": task.enabled,
        }  # fmt: skip
        if task.interval_id:
            initial.update(every=task.interval.every, period=task.interval.period)
        elif task.crontab_id:
            c = task.crontab
            initial["crontab"] = f"{c.minute} {c.hour} {c.day_of_month} {c.month_of_year} {c.day_of_week}"
        return initial
