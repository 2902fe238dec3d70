"""The console's core pages: cluster, topics, consumer groups, producers, messages, audit, metrics."""
