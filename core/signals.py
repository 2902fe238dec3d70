"""Signals of metric history.

``sample_stored`` is sent once a sampling cycle of one cluster is in the database (after its
transaction commits), with ``taken_at`` (the cycle's timestamp, as stored on its points) and
``cluster`` (the BROKER_NAMESRV entry sampled). Alert evaluation connects to it; a receiver that
raises does not lose the samples (they are already stored) and is logged by the sender.
"""

from django.dispatch import Signal

sample_stored = Signal()
