"""The platform every app of the project shares: roles and the audit log, access to the cluster
(one admin client per name server) and the snapshot/queries read from it, job heartbeats, the
metric clock, error pages and the request guard, template filters and context, and the overview's
section registry. Feature apps (``console``, ``history``, ``alerts``, ``analytics``) import this
app and the engine's client, never each other; this app imports no feature app.

Kept free of Django imports at package level: ``core.csv_cells`` runs in Spark's driver too.
"""
