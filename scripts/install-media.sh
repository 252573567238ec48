#!/usr/bin/env bash
# Installs what the media tests need from Debian: ffmpeg and ffprobe (package ffmpeg, Debian 12's
# 5.1.x; the tests make their clips with ffmpeg's lavfi testsrc/sine, libx264 and aac, and read
# the results with ffprobe). Nothing happens when /usr/bin/ffmpeg and /usr/bin/ffprobe exist.
#
#   scripts/install-media.sh
#
# Env: FFMPEG_MAJOR_EXPECTED (default 5: Debian 12's ffmpeg 5.1; another major is reported, not
# refused). Needs root or sudo for apt-get, and Debian's apt mirror when ffmpeg is missing.
set -euo pipefail

FFMPEG_MAJOR_EXPECTED="${FFMPEG_MAJOR_EXPECTED:-5}"
die() { echo "install-media: $*" >&2; exit 1; }

if [ ! -x /usr/bin/ffmpeg ] || [ ! -x /usr/bin/ffprobe ]; then
    command -v apt-get >/dev/null || die "ffmpeg is missing and apt-get is not available (install ffmpeg and ffprobe)"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || die "ffmpeg is missing: run as root or install it (apt-get install ffmpeg)"
        SUDO="sudo"
    fi
    log="$(mktemp)"
    echo "install-media: installing ffmpeg with apt-get (log: $log)"
    # The package lists may be stale or absent on a fresh machine: try, then update and retry.
    if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends ffmpeg >"$log" 2>&1; then
        { $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends ffmpeg; } >>"$log" 2>&1 \
            || { tail -n 20 "$log" >&2; die "apt-get install ffmpeg failed (see $log)"; }
    fi
    [ -x /usr/bin/ffmpeg ] && [ -x /usr/bin/ffprobe ] || die "apt-get installed ffmpeg but /usr/bin/ffmpeg or /usr/bin/ffprobe is missing"
fi

version="$(/usr/bin/ffmpeg -hide_banner -version | sed -n '1s/^ffmpeg version \([^ ]*\).*/\1/p')"
/usr/bin/ffprobe -hide_banner -version >/dev/null || die "/usr/bin/ffprobe does not run"
encoders="$(/usr/bin/ffmpeg -hide_banner -encoders 2>/dev/null)"
for need in libx264 aac; do
    grep -qw -- "$need" <<<"$encoders" || die "ffmpeg $version has no $need encoder"
done
case "$version" in
    "$FFMPEG_MAJOR_EXPECTED".*) echo "install-media: ffmpeg $version (/usr/bin/ffmpeg, /usr/bin/ffprobe)" ;;
    *) echo "install-media: ffmpeg $version, not the expected $FFMPEG_MAJOR_EXPECTED.x (Debian 12's); the media tests may differ" >&2 ;;
esac
