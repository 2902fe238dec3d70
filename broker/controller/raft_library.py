"""pysyncobj, imported without its damage to the ``socket`` module.

On import, pysyncobj's ``win_inet_pton`` replaces ``socket.inet_ntop`` on every platform with a
Windows-only version that raises elsewhere, which breaks every later caller in the process
(decoding a message id's host, for one). The real function is put back right after the import.
"""

from __future__ import annotations

import socket

_REAL_INET_NTOP = socket.inet_ntop
_REAL_INET_PTON = socket.inet_pton

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated  # noqa: E402

socket.inet_ntop = _REAL_INET_NTOP
socket.inet_pton = _REAL_INET_PTON

__all__ = ["FAIL_REASON", "SyncObj", "SyncObjConf", "replicated"]
