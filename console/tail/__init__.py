"""Live tail (W9): a websocket per browser tab, one pull loop per tailed topic in the ASGI process.

``pump`` reads a topic's new messages with the SDK's lite pull consumer as a reader (no
committed offsets, from each queue's end, long polling) and fans them out through the Channels
layer; ``consumer`` is the websocket end that applies each socket's filter; ``filters`` compiles
tag / SQL92 / key filters; ``routing`` maps the URL.
"""
