#!/usr/bin/env bash
# Runs every test of the project: unit, integration and doc tests of the whole workspace, the
# examples, the page's JavaScript client, a short fuzz smoke of every decoder entry point, and
# the interop matrix against aiomoqt, moq-dev, Cloudflare and the browser clients in headless
# Chromium and Firefox ESR (installs the pinned peers into ~/.cache/moq-peers, Chromium and
# firefox-esr with apt and the npm packages into ~/.cache/moq-browser, once).
#
#   FUZZ_SECONDS=30   seconds per fuzz target (0 skips the fuzz smoke)
#   MEDIA=0           skips the relay page's player in headless Chromium (scripts/media-check.sh)
#   INTEROP=0         skips the interop matrix (it needs crates.io, PyPI, npm and Debian's
#                     packages the first time)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Each step names the free disk too: a CI run once failed linking a test binary on a full disk.
step() { printf '\n==> %s   (disk: %s free)\n' "$*" "$(df -h . | awk 'NR==2 {print $4}')"; }

step "ffmpeg and ffprobe for the media tests (Debian's package, apt-get when missing)"
scripts/install-media.sh
scripts/install-redis.sh  # the route registry's tests start their own redis-server

step "cargo test (unit and integration tests, all targets)"
cargo test --workspace --all-targets

step "moq-transport's discovery, track and task tests over the in-memory transport, no network"
# MOQT_TEST_TRANSPORT=memory makes every test session an in-memory pair; in a network namespace
# of its own (where unshare is allowed) any socket the tests tried to use would fail.
isolate=()
if unshare -rn true 2>/dev/null; then isolate=(unshare -rn); fi
# --workspace (these test names are moq-transport's alone) keeps the first step's feature set,
# so nothing is built again: `-p moq-transport` alone would rebuild ~30 dependencies.
MOQT_TEST_TRANSPORT=memory "${isolate[@]}" cargo test --offline --workspace \
    --test discovery --test tracks --test tasks

step "cargo test --doc"
cargo test --workspace --doc

step "demo"
# `cargo run --example demo` as the README says, but built with the workspace's feature set
# (as above) so that no dependency is built a second time.
cargo build --quiet --workspace --examples
"${CARGO_TARGET_DIR:-target}/debug/examples/demo"

step "the self-contained examples (README, Examples to copy)"
# Each starts what it needs on a free loopback port, checks what it did and exits non-zero if
# anything is missing.
for example in fetch server publish subscribe_tracks track_status auth logging; do
    echo "-- $example"
    timeout 60 "${CARGO_TARGET_DIR:-target}/debug/examples/$example"
done

step "the relay page's JavaScript client, offline (node --test)"
node --test moq-relay/web/test/moq-codec.test.mjs moq-relay/web/test/moq-d14.test.mjs moq-relay/web/test/player.test.mjs \
    moq-relay/web/test/qmux.test.mjs moq-relay/web/test/connect.test.mjs moq-relay/web/test/qmux-interop.test.mjs

if [ "${MEDIA:-1}" != "0" ]; then
    step "the relay page's player: ffmpeg's clip through our relay into headless Chromium"
    scripts/media-check.sh
fi

if [ "${FUZZ_SECONDS:-30}" != "0" ]; then
    step "fuzz smoke (${FUZZ_SECONDS:-30}s per target)"
    scripts/fuzz-smoke.sh
fi

if [ "${INTEROP:-1}" != "0" ]; then
    step "interop matrix (tests/interop-expected.txt)"
    scripts/interop.sh

    step "moq-dev's token tool: its tokens verify in our relay, ours in its verifier"
    # shellcheck source=peers.env
    . scripts/peers.env
    [ -x "$MOQ_TOKEN_TOOL" ] || { echo "moq-token not installed at $MOQ_TOKEN_TOOL" >&2; exit 1; }
    cargo test --quiet --workspace --test auth moq_token_tool -- --nocapture

    step "Cloudflare's moq-pub (fMP4 from ffmpeg) through our relay into our subscriber, ffprobe on the result"
    [ -x "$MOQ_PUB" ] || { echo "moq-pub not installed at $MOQ_PUB" >&2; exit 1; }
    cargo test --quiet --workspace --test moq_pub -- --ignored --nocapture
fi

step "all tests passed"
