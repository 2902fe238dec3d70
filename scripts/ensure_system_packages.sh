#!/usr/bin/env bash
# Installs the system packages the stack and its tests need when they are missing:
# Java for PySpark, Debian's Chromium for the browser tests (never `playwright install`,
# which downloads from a CDN these machines cannot reach) and tcpdump, with which
# bench/latency_split.py (and its test) splits a latency into client and server time.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v tcpdump >/dev/null 2>&1 || [ -x /usr/bin/tcpdump ] || missing+=(tcpdump)
if [ "${SKIP_BROWSER:-0}" != "1" ] && [ ! -x /usr/bin/chromium ]; then
    missing+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
