#!/usr/bin/env bash
# The relay page's player, end to end: our relay binary (with its HTTP side, which serves the
# page), a broadcast published through it from a clip ffmpeg makes in real time (H.264
# testsrc + AAC sine), and the page in headless Chromium (moq-relay/web/test/player-check.mjs):
#
#   1. two viewers at once and one that joins late play live/demo: decoded video frames keep
#      increasing for several seconds, audio samples are decoded, the latency measured from
#      the LOC timestamps is under 2 s, the canvas is not blank, the late viewer starts at the
#      latest group; a screenshot goes to docs/media/player.png;
#   2. live/hevc, whose catalog names an HEVC codec (hev1...), which Debian's Chromium cannot
#      decode: the page says so.
#
# The publisher is the moq-relay example `loc_publisher` (ffmpeg's H.264 Annex B and AAC ADTS
# as an MSF catalog plus LOC tracks). Needs /usr/bin/ffmpeg (FAILS without it), and Chromium +
# playwright-core from scripts/install-browser.sh (run here; it does nothing once installed).
#
#   SECONDS_OF_MEDIA=15   length of the clip
#   SCREENSHOT=docs/media/player.png
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-target}"
ffmpeg=/usr/bin/ffmpeg
seconds="${SECONDS_OF_MEDIA:-15}"
screenshot="${SCREENSHOT:-docs/media/player.png}"
fail() { echo "media-check: FAILED: $*" >&2; exit 1; }

[ -x "$ffmpeg" ] || fail "$ffmpeg is missing (Debian: apt-get install ffmpeg)"
scripts/install-browser.sh >/dev/null || fail "scripts/install-browser.sh"
export PLAYWRIGHT_CORE="${MOQ_BROWSER:-$HOME/.cache/moq-browser}/node_modules/playwright-core"

cargo build --quiet -p moq-relay --bin moq-relay --example loc_publisher
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Two free loopback ports: UDP for QUIC and WebTransport, TCP for HTTP.
read -r quic http < <(python3 -c '
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
t = socket.socket(); t.bind(("127.0.0.1", 0))
print(u.getsockname()[1], t.getsockname()[1])')
"$target/debug/moq-relay" --bind "127.0.0.1:$quic" --tls-generate localhost --http "127.0.0.1:$http" \
    --auth-disabled >"$work/relay.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    fingerprint="$(curl -fsS "http://127.0.0.1:$http/fingerprint" 2>/dev/null)" && break
    sleep 0.1
done
[ -n "${fingerprint:-}" ] || { cat "$work/relay.log" >&2; fail "the relay did not start"; }

publish() { # namespace, log file, extra arguments
    local ns="$1" log="$2"
    shift 2
    "$target/debug/examples/loc_publisher" --url "moqt://localhost:$quic" --fingerprint "$fingerprint" \
        --namespace "$ns" --ffmpeg "$ffmpeg" "$@" >"$log" 2>&1 &
    pids+=($!)
}

echo "-- two viewers and a late one play live/demo (${seconds} s of H.264 + AAC through the relay)"
publish live/demo "$work/publish-demo.log" --seconds "$seconds"
if ! node moq-relay/web/test/player-check.mjs --page "http://localhost:$http/?play=live/demo" \
    --viewers 2 --late-after-ms 3000 --watch-ms 4000 --max-latency-ms 2000 --screenshot "$screenshot"; then
    cat "$work/publish-demo.log" >&2
    fail "the player did not play live/demo"
fi
echo "screenshot: $screenshot"

echo "-- live/hevc names hev1.1.6.L93.B0 in its catalog: the page says it cannot decode it"
publish live/hevc "$work/publish-hevc.log" --seconds 5 --video-codec hev1.1.6.L93.B0
if ! node moq-relay/web/test/player-check.mjs --page "http://localhost:$http/?play=live/hevc" \
    --expect-unsupported hev1; then
    cat "$work/publish-hevc.log" >&2
    fail "the page did not say that HEVC cannot be decoded"
fi
echo "media-check: passed"
