"""The example budgets of the fuzz tests: fixed and small in the default run, larger under
``-m slow``. ``deadline=None``: a shared CI machine's pauses are not a finding; a hang is caught
by pytest's timeout instead."""

from hypothesis import HealthCheck, settings

QUICK = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
