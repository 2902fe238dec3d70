"""High availability: a master's commit log streamed to its slaves over the HA port.

It lives in the store, as RocketMQ's HAService does: what travels is commit-log bytes and
offsets, and what a slave does with them (append at the master's offsets, dispatch its own
queues and index, cut a divergent tail) is the store's business (``broker/store/replica.py``).
The broker only says which role it has and where its master is (``roles``, registration).

- ``protocol``: the frames (RocketMQ's HAClient report and HAConnection transfer header).
- ``master``: ``HAServer`` — accepts slaves on ``haListenPort`` and streams to each.
- ``slave``: ``HAClient`` — connects to the master, reports its offset, appends what comes.
- ``auth``: the sign-in a slave sends before anything else, when the master asks for one, and
  what a master checks of it (``broker/server/ha_security`` decides secrets and members).
- ``epochs``: ``EpochFile`` — controller mode's epoch list (RocketMQ's EpochFileCache). Given to
  ``HAServer``/``HAClient``, a connection starts with a handshake that finds where the slave's log
  and the master's agree, and the slave cuts its divergent tail there.
"""
