#!/usr/bin/env bash
# The relay page's player, end to end: our relay binary (with its HTTP side, which serves the
# page), a broadcast published through it with the CLI (`moq publish`, fMP4 on stdin) from a
# clip ffmpeg makes in real time (H.264 testsrc + AAC sine), and the page in headless
# Chromium (moq-relay/web/test/player-check.mjs):
#
#   1. two viewers at once and one that joins late play live/demo: decoded video frames keep
#      increasing for several seconds, audio samples are decoded, the latency measured from
#      the LOC timestamps is under 2 s, the canvas is not blank, the late viewer starts at the
#      latest group; a screenshot is taken (see SCREENSHOT);
#   2. live/hevc, a catalog written by hand (`moq publish --format lines --track catalog`) that
#      names an HEVC codec (hev1...), which Debian's Chromium cannot decode: the page says so;
#   3. bad catalogs, the same way: one that is not JSON, one that names a track nobody
#      publishes: the page shows the error;
#   4. scripts/watch-check.sh: moq-dev's player @moq/watch plays a CMAF broadcast of our CLI.
#   After 1, one viewer and a late one play live/demo-ws in a Chromium without WebTransport:
#   the page falls back to its WebSocket (QMux, qmux.js) and must say so (window.moqTransport).
#   Then one viewer and a late one play live/demo-ff in Firefox ESR over WebTransport: Firefox
#   negotiates no WebTransport protocol, so the page speaks draft-14 (window.moqVersion).
#
# Needs /usr/bin/ffmpeg (FAILS without it), and Chromium + playwright-core, Firefox ESR +
# puppeteer-core from scripts/install-browser.sh (run here; it does nothing once installed).
#
#   FIREFOX=0             skip the Firefox step
#
#   SECONDS_OF_MEDIA=15   length of the clip
#   SCREENSHOT=FILE       where step 1's screenshot goes [default: a file under ${TMPDIR:-/tmp},
#                         so a test run leaves the tree as it was]; SCREENSHOT=docs/media/player.png
#                         refreshes the README's picture
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-target}"
ffmpeg=/usr/bin/ffmpeg
seconds="${SECONDS_OF_MEDIA:-15}"
screenshot="${SCREENSHOT:-${TMPDIR:-/tmp}/moq-media-check-player.png}"
fail() { echo "media-check: FAILED: $*" >&2; exit 1; }

[ -x "$ffmpeg" ] || fail "$ffmpeg is missing (Debian: apt-get install ffmpeg)"
scripts/install-browser.sh >/dev/null || fail "scripts/install-browser.sh"
export PLAYWRIGHT_CORE="${MOQ_BROWSER:-$HOME/.cache/moq-browser}/node_modules/playwright-core"

# The workspace feature set (as test.sh builds the examples), so no dependency is built twice.
cargo build --quiet --workspace --bins
work="$(mktemp -d)"
pids=()
cleanup() {
    for ((f = 3; f < ${fd:-3}; f++)); do eval "exec $f>&-"; done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=dev-relay.sh
. scripts/dev-relay.sh
start_dev_relay

moq=("$target/debug/moq" --url "moqt://localhost:$quic" --fingerprint "$fingerprint")

# publish_clip NAME SECONDS: ffmpeg's test pattern and a tone, H.264 + AAC as CMAF, published
# live by our CLI as broadcast NAME in the background (logs in $work, killed at exit).
publish_clip() {
    local tag="${1##*/}"
    "$ffmpeg" -hide_banner -loglevel error -re -f lavfi -i testsrc=size=640x360:rate=30 \
        -f lavfi -i sine=frequency=440:sample_rate=48000 -t "$2" \
        -c:v libx264 -preset veryfast -g 30 -pix_fmt yuv420p -c:a aac -ac 2 \
        -f mp4 -movflags cmaf+separate_moof+delay_moov+skip_trailer+frag_every_frame - 2>"$work/ffmpeg-$tag.log" |
        "${moq[@]}" publish "$1" >"$work/publish-$tag.log" 2>&1 &
    pids+=($!)
}

echo "-- two viewers and a late one play live/demo (${seconds} s of H.264 + AAC through the relay)"
publish_clip live/demo "$seconds"
if ! node moq-relay/web/test/player-check.mjs --page "http://localhost:$http/?play=live/demo" \
    --viewers 2 --late-after-ms 3000 --watch-ms 4000 --max-latency-ms 2000 --screenshot "$screenshot"; then
    cat "$work/ffmpeg-demo.log" "$work/publish-demo.log" >&2
    fail "the player did not play live/demo"
fi
echo "screenshot: $screenshot"

echo "-- the same in a Chromium without WebTransport: the page plays live/demo over its WebSocket (QMux)"
publish_clip live/demo-ws "$seconds"
if ! node moq-relay/web/test/player-check.mjs --page "http://localhost:$http/?play=live/demo-ws" \
    --viewers 1 --late-after-ms 3000 --watch-ms 4000 --max-latency-ms 2000 \
    --no-webtransport --expect-transport websocket; then
    cat "$work/ffmpeg-demo-ws.log" "$work/publish-demo-ws.log" >&2
    fail "the player did not play live/demo-ws over WebSocket"
fi

if [ "${FIREFOX:-1}" != "0" ]; then
    # Twice as long a clip: Firefox takes seconds to start, and a clip that ends ends the tracks.
    echo "-- the same in Firefox ESR: the page plays live/demo-ff over WebTransport, in draft-14 (no WebTransport protocols there)"
    publish_clip live/demo-ff "$((seconds * 2))"
    if ! node moq-relay/web/test/player-check.mjs --page "http://localhost:$http/?play=live/demo-ff" --browser firefox \
        --viewers 1 --late-after-ms 3000 --watch-ms 4000 --max-latency-ms 2000 \
        --expect-transport webtransport --expect-version 14; then
        cat "$work/ffmpeg-demo-ff.log" "$work/publish-demo-ff.log" >&2
        fail "the player did not play live/demo-ff in Firefox over WebTransport"
    fi
fi

echo "-- live/hevc names hev1.1.6.L93.B0 in its catalog: the page says it cannot decode it"
# A catalog is one line, one object; each fifo stays open (the broadcast stays) until the end.
fd=3
catalog() { # namespace, the catalog's text
    mkfifo "$work/$fd"
    "${moq[@]}" publish "$1" --format lines --track catalog <"$work/$fd" >>"$work/publish-catalogs.log" 2>&1 &
    pids+=($!)
    eval "exec $fd>\"\$work/\$fd\""
    echo "$2" >&"$fd"
    fd=$((fd + 1))
}
check() { # what, player-check arguments...
    local what="$1"
    shift
    node moq-relay/web/test/player-check.mjs "$@" || { cat "$work/publish-catalogs.log" >&2; fail "$what"; }
}
catalog live/hevc '{"version":"draft-01","generatedAt":1,"tracks":[{"name":"video","packaging":"loc","role":"video","codec":"hev1.1.6.L93.B0","width":640,"height":360,"framerate":30,"renderGroup":1,"isLive":true}]}'
check "the page did not say that HEVC cannot be decoded" \
    --page "http://localhost:$http/?play=live/hevc" --expect-unsupported hev1

echo "-- live/bad-json: a catalog that is not JSON; live/missing: a catalog naming a track nobody publishes"
catalog live/bad-json '{"version": "draft-01", "tracks": ['
check "no error shown for a catalog that is not JSON" \
    --page "http://localhost:$http/?play=live/bad-json" --expect-error "catalog is not JSON"
catalog live/missing '{"version":"draft-01","generatedAt":1,"tracks":[{"name":"video","packaging":"loc","role":"video","codec":"avc1.64001e","width":640,"height":360,"renderGroup":1,"isLive":true}]}'
check "no error shown for a catalog naming a missing track" \
    --page "http://localhost:$http/?play=live/missing" --expect-error "video track video:"
echo "-- a player we did not write: moq-dev's @moq/watch plays what our CLI publishes (scripts/watch-check.sh)"
BUILD=0 scripts/watch-check.sh || fail "scripts/watch-check.sh"
echo "media-check: passed"
