#!/usr/bin/env bash
# A media implementation we did not write plays what we publish: moq-dev's player @moq/watch
# (npm, pinned in web/package.json) in headless Chromium (web/driver.mjs, cell
# web/cells/moq-watch.js) plays live/demo.msf, which our CLI publishes (`moq publish
# --packaging cmaf`, fMP4 on stdin from a clip ffmpeg makes in real time: H.264 testsrc + AAC
# sine) through our relay binary. Pass = video frames decoded by WebCodecs keep coming and the
# canvas is not blank, at each draft in DRAFTS.
#
# The name ends in ".msf", which makes @moq/watch read an MSF catalog from the track `catalog`
# (otherwise it reads hang's `catalog.json`); packaging "cmaf" because its LOC reading differs
# from LOC's (see docs/interop.md, "Media across implementations").
#
# Needs /usr/bin/ffmpeg (FAILS without it), and Chromium + the npm packages from
# scripts/install-browser.sh (run here; it does nothing once installed).
#
#   DRAFTS="14 16 19"     the drafts the player connects at (@moq/watch's @moq/net: 14-19)
#   SECONDS_OF_MEDIA=20   length of the clip (each draft's viewer joins it live)
#   BUILD=1               cargo build the CLI and the relay first (0: use target/debug as is)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-target}"
ffmpeg=/usr/bin/ffmpeg
drafts="${DRAFTS:-14 16 19}"
seconds="${SECONDS_OF_MEDIA:-20}"
fail() { echo "watch-check: FAILED: $*" >&2; exit 1; }

[ -x "$ffmpeg" ] || fail "$ffmpeg is missing (Debian: apt-get install ffmpeg)"
scripts/install-browser.sh >/dev/null || fail "scripts/install-browser.sh"
if [ "${BUILD:-1}" = 1 ]; then
    cargo build --quiet -p moqt-cli -p moq-relay --bins || fail "cargo build"
fi
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

for draft in $drafts; do
    name="live/demo-$draft.msf"
    echo "-- @moq/watch at draft $draft plays $name (CMAF, ${seconds} s of H.264 + AAC through the relay)"
    # The viewer first (it waits for the announcement), the publisher once Chromium is up.
    node web/driver.mjs --client moq-watch --cell watch --draft "$draft" \
        --url "https://localhost:$quic/" --fingerprint "$fingerprint" --namespace "$name" \
        --count 60 --interval-ms 3000 --timeout-ms 15000 >"$work/watch-$draft.json" &
    viewer=$!
    sleep "${PUBLISH_AFTER:-2}"
    "$ffmpeg" -hide_banner -loglevel error -re -f lavfi -i testsrc=size=640x360:rate=30 \
        -f lavfi -i sine=frequency=440:sample_rate=48000 -t "$seconds" \
        -c:v libx264 -preset veryfast -g 30 -pix_fmt yuv420p -c:a aac -ac 2 \
        -f mp4 -movflags cmaf+separate_moof+delay_moov+skip_trailer+frag_every_frame - 2>"$work/ffmpeg-$draft.log" |
        "$target/debug/moq" --url "moqt://localhost:$quic" --fingerprint "$fingerprint" \
            publish "$name" --packaging cmaf >"$work/publish-$draft.log" 2>&1 &
    pids+=($!)
    wait "$viewer" || true
    line="$(cat "$work/watch-$draft.json")"
    echo "$line"
    case "$line" in
        *'"result":"pass"'*) ;;
        *)
            cat "$work/ffmpeg-$draft.log" "$work/publish-$draft.log" >&2
            tail -n "${RELAY_LOG_LINES:-20}" "$work/relay.log" >&2
            fail "@moq/watch did not play $name at draft $draft"
            ;;
    esac
done
echo "watch-check: passed"
