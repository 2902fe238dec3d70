#!/usr/bin/env bash
# Build pyrocket's images from the repository (the build context) on localhost/debian-base:
#   localhost/pyrocket:latest            name server, broker, controller, console, Celery, Spark
#   localhost/pyrocket-postgres:latest   PostgreSQL 15 from Debian
#   localhost/pyrocket-redis:latest      Redis from Debian
# Run docker/build-base.sh first. ENGINE=docker builds with docker instead of podman.
# Extra arguments go to every build (e.g. --network host, --no-cache).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-podman}
for target in app postgres redis; do
    case $target in
        app) tag=localhost/pyrocket:latest ;;
        *) tag=localhost/pyrocket-$target:latest ;;
    esac
    echo "== $tag (target $target)"
    "$engine" build -f docker/Containerfile --target "$target" -t "$tag" "$@" .
done
"$engine" image ls --filter reference='localhost/pyrocket*'
