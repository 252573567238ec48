#!/usr/bin/env bash
# The interop matrix against aiomoqt, moq-dev and Cloudflare (see docs/interop.md).
#
#   scripts/interop.sh [--only SUBSTRING] [--docs]
#
# Installs the pinned peers (cached in ${MOQ_PEERS:-~/.cache/moq-peers}; skipped when present),
# builds our relay, interop client and example publisher/subscriber, then runs
# scripts/interop.py, which fails when any outcome differs from tests/interop-expected.txt.
# --docs also rewrites docs/interop.md. Needs openssl (for the test certificate).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/install-peers.sh
# Chromium, the pinned npm packages of web/ and their bundles (${MOQ_BROWSER:-~/.cache/moq-browser}).
scripts/install-browser.sh
# shellcheck source=peers.env
. scripts/peers.env

# --workspace: the feature set of `cargo test --workspace`, so nothing is built twice.
cargo build --quiet --workspace --bins --examples
exec "$AIOMOQT_VENV/bin/python" scripts/interop.py "$@"
