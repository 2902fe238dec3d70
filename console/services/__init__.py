"""Cluster-side logic of the operations pages, over ``MQAdmin`` and the SDK producer (no Django)."""
