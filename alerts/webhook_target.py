"""Where an alert webhook may go, and the POST itself: no way into the console's own network.

An operator names the URL and the Celery worker, inside the network, POSTs to it and retries: left
open, a rule could reach Redis on 127.0.0.1:6379, a cloud's metadata service on 169.254.169.254 or
any private address, and read the answers (or a port scan's connect errors) on the event page. So:

- every address the URL's host resolves to must be public (``is_global``): loopback, link-local
  (metadata services included), private, shared (100.64/10), unspecified, multicast and reserved
  addresses are refused, unless ``ALERT_WEBHOOK_ALLOWED_NETWORKS`` (networks or addresses,
  comma separated) names them;
- an IPv6 address that carries an IPv4 one for translation is judged as that IPv4 address (a
  connection to it reaches that address): IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
  ``::a.b.c.d``, SIIT ``::ffff:0:a.b.c.d`` and NAT64 ``64:ff9b::a.b.c.d`` (so an IPv6-only
  console behind NAT64 still reaches public receivers). Tunnels and local prefixes are refused
  whatever they carry (Python counts most of them public): 6to4 ``2002::/16`` and Teredo
  ``2001::/32`` (their IPv4 part is a relay, not the receiver), local-use NAT64
  ``64:ff9b:1::/48`` (the operator's own translator) and the deprecated site-local ``fec0::/10``;
- the connection goes to an address that was checked, not to a second lookup of the name, which a
  rebinding DNS could answer with 127.0.0.1 the second time;
- no redirect is followed (http.client follows none): a 3xx is a failed attempt;
- the whole POST (connect, TLS, sending, the status line) has one deadline, the timeout, and
  nothing after the status line is read: a receiver answering a byte at a time cannot hold a
  worker;
- what a failure records is an HTTP status or a short error class ("connection refused"), never
  the receiver's body or the raw error text.

Checked when a rule is saved (a form error) and again at each send: the allow-list may have
changed, and a name may resolve differently since.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse

from django.conf import settings

ALLOWED_SETTING = "ALERT_WEBHOOK_ALLOWED_NETWORKS"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# IPv6 prefixes whose last 32 bits are the IPv4 address a connection ends at (:: and ::1 are
# IPv6's own unspecified and loopback addresses, judged as such).
TRANSLATING = tuple(
    ipaddress.IPv6Network(n) for n in ("::ffff:0:0/96", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96")
)
IPV6_OWN = (ipaddress.IPv6Address("::"), ipaddress.IPv6Address("::1"))
REFUSED_PREFIXES = (
    (ipaddress.IPv6Network("2002::/16"), "a 6to4 (tunnel)"),
    (ipaddress.IPv6Network("2001::/32"), "a Teredo (tunnel)"),
    (ipaddress.IPv6Network("64:ff9b:1::/48"), "a local-use NAT64"),
    (ipaddress.IPv6Network("fec0::/10"), "a site-local"),
)
STATUS_LINE_MAX = 256  # "HTTP/1.1 200 OK\r\n" with room for a long reason phrase


class WebhookRefused(Exception):
    """The URL's address is not one a webhook may go to: permanent, never retried."""


class WebhookFailed(Exception):
    """A POST that did not succeed; its text is a status or a short error class, safe to show."""


def judged_address(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one of a translating prefix carries, else ``address`` itself."""
    if (
        isinstance(address, ipaddress.IPv6Address)
        and address not in IPV6_OWN
        and any(address in prefix for prefix in TRANSLATING)
    ):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def refusal(address: IPAddress) -> str | None:
    """Why a webhook may not go to ``address``; None when it may."""
    judged = judged_address(address)
    allowed = settings.ALERT_WEBHOOK_ALLOWED_NETWORKS
    if any(judged in network or address in network for network in allowed):
        return None
    kind = _non_public_kind(judged)
    if kind is None:
        return None
    shown = judged if judged == address else f"{address} (carrying {judged})"
    return f"{shown} is {kind} address: name it in {ALLOWED_SETTING} to send webhooks there"


def _non_public_kind(judged: IPAddress) -> str | None:
    refused_prefix = next((kind for prefix, kind in REFUSED_PREFIXES if judged in prefix), None)
    if refused_prefix:
        return refused_prefix
    if judged.is_loopback:
        kind = "a loopback"
    elif judged.is_link_local:
        kind = "a link-local (metadata service)"
    elif judged.is_unspecified:
        kind = "an unspecified"
    elif judged.is_multicast:
        kind = "a multicast"
    elif judged.is_private:
        kind = "a private"
    elif not judged.is_global:
        kind = "a non-public"
    else:
        return None
    return kind


def checked_addresses(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, each allowed; raises WebhookRefused for the first that is
    not, or OSError (socket.gaierror) when the name does not resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        reason = refusal(ipaddress.ip_address(address.split("%", 1)[0]))  # a scope id is not the address
        if reason:
            raise WebhookRefused(reason)
    return addresses


def split_url(url: str) -> tuple[bool, str, int, str]:
    """(https, host, port, path with query) of an http(s) URL; ValueError for anything else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL with a host")
    https = parts.scheme.lower() == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return https, parts.hostname, parts.port or (443 if https else 80), path


def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> None:
    """POST ``body`` to ``url`` at a checked address; WebhookRefused or WebhookFailed unless 2xx."""
    try:
        https, host, port, path = split_url(url)
    except ValueError:
        raise WebhookRefused(f"not an http(s) URL: {url}") from None
    try:
        addresses = checked_addresses(host, port)
    except OSError as exc:
        raise WebhookFailed(short_error(exc)) from None  # DNS may answer on the next try
    connection_class = http.client.HTTPSConnection if https else http.client.HTTPConnection
    connection = connection_class(host, port, timeout=timeout)  # Host header and TLS name: the host

    deadline = Deadline(timeout)

    def to_checked_address(_address, _timeout, _source_address=None) -> socket.socket:
        return deadline.watch(_connect(addresses, port, deadline))

    # http.client opens its socket through this attribute: pointed at the checked addresses, the
    # name is not looked up again (TLS still verifies the certificate against the host's name).
    connection._create_connection = to_checked_address  # type: ignore[attr-defined]
    try:
        connection.request("POST", path, body, headers)
        status = read_status(connection.sock)
    except (OSError, http.client.HTTPException) as exc:
        raise WebhookFailed("timed out" if deadline.expired else short_error(exc)) from None
    finally:
        deadline.cancel()
        connection.close()
    if not 200 <= status < 300:
        raise WebhookFailed(f"HTTP {status}")


def read_status(sock: socket.socket) -> int:
    """The status of the answer's first line; the headers and body are never read (only the
    status is recorded, and a receiver cannot make a worker wait for them)."""
    with sock.makefile("rb") as answer:
        line = answer.readline(STATUS_LINE_MAX)
    parts = line.split(None, 2)
    # A line cut short (the deadline shut the socket, or the receiver closed) is no answer.
    if (
        not line.endswith(b"\n")
        or len(parts) < 2
        or not parts[0].startswith(b"HTTP/")
        or not re.fullmatch(rb"[1-5]\d\d", parts[1])
    ):
        raise http.client.BadStatusLine(line[:40].decode("latin-1"))
    return int(parts[1])


class Deadline:
    """One time limit for a whole POST: each socket operation has the timeout too, so a peer
    trickling bytes would restart it every time. When the limit passes, the socket is shut down
    from a timer thread, which ends whatever call is blocked on it (connect, TLS, send, read)."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        left = self.ends - time.monotonic()
        if left <= 0:
            self.expired = True
            raise TimeoutError("the webhook's deadline passed")
        return left

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._fd = sock.fileno()  # TLS wraps the same descriptor
        return sock

    def _expire(self) -> None:
        with self._lock:  # cancel() holds it while the descriptor may still be closed
            self.expired = True
            if self._fd is None:
                return
            try:
                with socket.socket(fileno=os.dup(self._fd)) as same:
                    same.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer

    def cancel(self) -> None:
        """Before the socket is closed: its descriptor number may be reused afterwards."""
        with self._lock:
            self._timer.cancel()
            self._fd = None


def _connect(addresses: list[str], port: int, deadline: Deadline) -> socket.socket:
    last: OSError | None = None
    for address in addresses:
        try:
            return socket.create_connection((address, port), deadline.remaining())
        except OSError as exc:
            last = exc
    raise last or OSError("no address")


def short_error(exc: BaseException) -> str:
    """A failure's class in a few words: what the event page may show of it."""
    kinds: list[tuple[type[BaseException], str]] = [
        (socket.gaierror, "name not resolved"),
        (ConnectionRefusedError, "connection refused"),
        (ConnectionResetError, "connection reset"),
        (TimeoutError, "timed out"),
        (ssl.SSLError, "TLS error"),
        (http.client.HTTPException, "no valid HTTP answer"),
        (OSError, "connection failed"),
    ]
    return next((text for kind, text in kinds if isinstance(exc, kind)), type(exc).__name__)
