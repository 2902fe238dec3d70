#!/usr/bin/env bash
# Build the base image every pyrocket image starts from, with no container registry:
# debootstrap a minimal Debian rootfs from Debian's own package archive and import it
# into podman as localhost/debian-base (the FROM of docker/Containerfile).
#
# Needs root (debootstrap chroots and creates device nodes) and the Debian packages
# debootstrap and podman. Usage:
#   docker/build-base.sh [--suite bookworm] [--mirror URL] [--tag localhost/debian-base:bookworm]
#                        [--extra-ca-dir DIR]
# --extra-ca-dir: trust the *.crt certificates of DIR in the image too (its apt, pip and npm),
# for a network whose HTTPS goes through an intercepting proxy with its own CA, as on the
# machines this was built on (/usr/local/share/ca-certificates). An image built with it trusts
# that CA: do not ship it elsewhere.
# Env: BASE_ROOTFS_DIR keeps the unpacked rootfs there (default: a temporary directory, removed).
set -euo pipefail

suite=bookworm
mirror=http://deb.debian.org/debian
tag=localhost/debian-base:bookworm
extra_ca_dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --suite) suite=$2; shift 2 ;;
        --mirror) mirror=$2; shift 2 ;;
        --tag) tag=$2; shift 2 ;;
        --extra-ca-dir) extra_ca_dir=$2; shift 2 ;;
        *) echo "usage: $0 [--suite S] [--mirror URL] [--tag NAME] [--extra-ca-dir DIR]" >&2; exit 2 ;;
    esac
done

[ "$(id -u)" -eq 0 ] || { echo "$0: run as root (debootstrap needs it)" >&2; exit 1; }
# Checked before the debootstrap: only *.crt files are copied (update-ca-certificates reads no other).
if [ -n "$extra_ca_dir" ] && ! compgen -G "$extra_ca_dir/*.crt" >/dev/null; then
    echo "$0: --extra-ca-dir $extra_ca_dir holds no *.crt file (the proxy's CA certificate, PEM)" >&2
    exit 2
fi
for tool in debootstrap podman tar; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done

rootfs=${BASE_ROOTFS_DIR:-}
cleanup=""
if [ -z "$rootfs" ]; then
    rootfs=$(mktemp -d /var/tmp/debian-base.XXXXXX)
    cleanup=$rootfs
fi
trap '[ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT

# minbase: essential packages plus apt only; ca-certificates so the image's apt and pip
# speak https. Everything else is installed by the Containerfile's own steps.
debootstrap --variant=minbase --include=ca-certificates "$suite" "$rootfs" "$mirror"

# The image's apt uses the same mirror, with the security and updates suites.
cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
SOURCES
if [ -n "$extra_ca_dir" ]; then
    cp "$extra_ca_dir"/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates
fi
# Smaller image: no apt lists or downloaded packages, no man pages.
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin

tar --numeric-owner --xattrs -C "$rootfs" -c . \
    | podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$tag"
podman image ls "$tag"
