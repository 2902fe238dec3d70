"""High availability: a master's commit log streamed to its slaves over the HA port.

It lives in the store, as RocketMQ's HAService does: what travels is commit-log bytes and
offsets, and what a slave does with them (append at the master's offsets, dispatch its own
queues and index, cut a divergent tail) is the store's business (``broker/store/replica.py``).
The broker only says which role it has and where its master is (``roles``, registration).

- ``protocol``: the frames (RocketMQ's HAClient report and HAConnection transfer header).
- ``master``: ``HAServer`` — accepts slaves on ``haListenPort`` and streams to each.
- ``slave``: ``HAClient`` — connects to the master, reports its offset, appends what comes.
"""
