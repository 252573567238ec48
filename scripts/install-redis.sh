#!/usr/bin/env bash
# Installs the key-value store that the route registry's tests start (moq-relay/tests/registry.rs):
# a Valkey or Redis server binary. A `valkey-server` already on PATH is used as it is; otherwise
# Debian's redis-server (Debian 12: 7.0.x; bookworm has no valkey package). Nothing happens when
# one of them is present. The tests start their own server on a free loopback port; the one that
# Debian's package may start as a service is not used by them.
#
#   scripts/install-redis.sh
#
# Env: MOQ_REDIS_SERVER (a server binary to use instead; checked, never installed). Needs root or
# sudo for apt-get, and Debian's apt mirror when neither binary is present.
set -euo pipefail

die() { echo "install-redis: $*" >&2; exit 1; }

found() {
    if [ -n "${MOQ_REDIS_SERVER:-}" ]; then
        [ -x "$MOQ_REDIS_SERVER" ] || die "MOQ_REDIS_SERVER=$MOQ_REDIS_SERVER is not an executable"
        echo "$MOQ_REDIS_SERVER"
        return 0
    fi
    command -v valkey-server || command -v redis-server || return 1
}

if ! bin="$(found)"; then
    command -v apt-get >/dev/null || die "no valkey-server or redis-server on PATH and apt-get is not available (install one, or set MOQ_REDIS_SERVER)"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || die "redis-server is missing: run as root or install it (apt-get install redis-server)"
        SUDO="sudo"
    fi
    log="$(mktemp)"
    echo "install-redis: installing redis-server with apt-get (log: $log)"
    # The package lists may be stale or absent on a fresh machine: try, then update and retry.
    if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends redis-server >"$log" 2>&1; then
        { $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends redis-server; } >>"$log" 2>&1 \
            || { tail -n 20 "$log" >&2; die "apt-get install redis-server failed (see $log)"; }
    fi
    bin="$(found)" || die "apt-get installed redis-server but no redis-server is on PATH"
fi

version="$("$bin" --version 2>/dev/null | head -n 1)" || die "$bin --version does not run"
[ -n "$version" ] || die "$bin --version printed nothing"
echo "install-redis: $bin ($version)"
