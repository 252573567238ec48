#!/usr/bin/env bash
# A media implementation we did not write plays what we publish: moq-dev's player @moq/watch
# (npm, pinned in web/package.json) in headless Chromium (web/driver.mjs, cell
# web/cells/moq-watch.js) plays live/demo.msf, which our CLI publishes (`moq publish
# --packaging cmaf`, fMP4 on stdin from a clip ffmpeg makes in real time: H.264 testsrc + AAC
# sine) through our relay binary. Pass = video frames decoded by WebCodecs keep coming and the
# canvas is not blank, at each draft in DRAFTS. In Firefox ESR (web/browser.mjs) it cannot run:
# its @moq/net declines WebTransport in any Firefox, which the last expected failure asserts.
#
# The name ends in ".msf", which makes @moq/watch read an MSF catalog from the track `catalog`
# (otherwise it reads hang's `catalog.json`); packaging "cmaf" because its LOC reading differs
# from LOC's (see docs/interop.md, "Media across implementations").
#
# Needs /usr/bin/ffmpeg (FAILS without it), and Chromium + the npm packages from
# scripts/install-browser.sh (run here; it does nothing once installed).
#
#   DRAFTS="14 16"        the drafts the player plays at (17-19 fail: see the expected failures)
#   WS_DRAFTS="16"        the drafts it plays at again over a WebSocket (QMux, qmux-01.moqt-N to
#                         the relay's HTTP listener) in a Chromium without WebTransport
#   SECONDS_OF_MEDIA=20   length of the clip (each draft's viewer joins it live)
#   BUILD=1               cargo build the CLI and the relay first (0: use target/debug as is)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-target}"
ffmpeg=/usr/bin/ffmpeg
drafts="${DRAFTS:-14 16}"
seconds="${SECONDS_OF_MEDIA:-20}"
fail() { echo "watch-check: FAILED: $*" >&2; exit 1; }

[ -x "$ffmpeg" ] || fail "$ffmpeg is missing (Debian: apt-get install ffmpeg)"
scripts/install-browser.sh >/dev/null || fail "scripts/install-browser.sh"
if [ "${BUILD:-1}" = 1 ]; then
    cargo build --quiet --workspace --bins || fail "cargo build"
fi
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=dev-relay.sh
. scripts/dev-relay.sh
start_dev_relay

# SUBSCRIBE_NAMESPACE requests the relay answered (each viewer sends one before it subscribes).
subscribe_namespaces() {
    curl -fsS "http://127.0.0.1:$http/metrics" 2>/dev/null |
        awk '/^moq_relay_requests_total\{/ && /kind="SUBSCRIBE_NAMESPACE"/ { n += $NF } END { print n + 0 }'
}

publish() { # name, log suffix: ffmpeg's clip into `moq publish NAME --packaging cmaf`, in the background
    "$ffmpeg" -hide_banner -loglevel error -re -f lavfi -i testsrc=size=640x360:rate=30 \
        -f lavfi -i sine=frequency=440:sample_rate=48000 -t "$seconds" \
        -c:v libx264 -preset veryfast -g 30 -pix_fmt yuv420p -c:a aac -ac 2 \
        -f mp4 -movflags cmaf+separate_moof+delay_moov+skip_trailer+frag_every_frame - 2>"$work/ffmpeg-$2.log" |
        "$target/debug/moq" --url "moqt://localhost:$quic" --fingerprint "$fingerprint" \
            publish "$1" --packaging cmaf >"$work/publish-$2.log" 2>&1 &
    pids+=($!)
}

viewer() { # draft, name, log suffix, timeout ms[, driver arguments]: the driver in the background (its pid in $viewer)
    node web/driver.mjs --client moq-watch --cell watch --draft "$1" \
        --url "https://localhost:$quic/" --fingerprint "$fingerprint" --namespace "$2" \
        --count 60 --interval-ms 3000 --timeout-ms "$4" "${@:5}" >"$work/watch-$3.json" &
    viewer=$!
}

# Waits until the relay has answered more SUBSCRIBE_NAMESPACE requests than $1 (the viewer is
# waiting for the announcement), or the viewer ended.
await_viewer() {
    for _ in $(seq 300); do
        [ "$(subscribe_namespaces)" -gt "$1" ] && return 0
        kill -0 "$viewer" 2>/dev/null || return 0
        sleep 0.05
    done
    fail "the viewer sent no SUBSCRIBE_NAMESPACE within 15 s"
}

plays() { # draft, log suffix, what, driver arguments...: one viewer, then the broadcast, then the verdict
    local draft="$1" suffix="$2" what="$3"
    shift 3
    local name="live/demo-$suffix.msf"
    echo "-- @moq/watch at draft $draft plays $name$what (CMAF, ${seconds} s of H.264 + AAC through the relay)"
    # The viewer first: it waits for the announcement, so its catalog SUBSCRIBE is there before
    # the catalog (a viewer that joins later gets no catalog: see the last case). Measured: the
    # SUBSCRIBE reaches the relay ~10 ms after the announcement, the catalog ~0.8 s after it
    # (ffmpeg's start and its first fragment).
    before="$(subscribe_namespaces)"
    viewer "$draft" "$name" "$suffix" 15000 "$@"
    await_viewer "$before"
    publish "$name" "$suffix"
    wait "$viewer" || true
    line="$(cat "$work/watch-$suffix.json")"
    echo "$line"
    case "$line" in
        *'"result":"pass"'*) ;;
        *)
            cat "$work/ffmpeg-$suffix.log" "$work/publish-$suffix.log" >&2
            tail -n "${RELAY_LOG_LINES:-20}" "$work/relay.log" >&2
            fail "@moq/watch did not play $name at draft $draft$what"
            ;;
    esac
}
for draft in $drafts; do
    plays "$draft" "$draft" ""
done
for draft in ${WS_DRAFTS:-16}; do
    plays "$draft" "$draft-ws" " over a WebSocket (no WebTransport in the page)" --transport ws --ws "ws://127.0.0.1:$http/"
done

# Expected failures (theirs; docs/interop.md, "Media across implementations"). Each must fail
# the way written down there: a pass means the reason is gone and the docs need updating.
expect_fail() { # what, log suffix, pattern the failure must show (in the driver's line or the relay log)
    local line
    line="$(cat "$work/watch-$2.json")"
    echo "$line"
    case "$line" in
        *'"result":"pass"'*) fail "$1: expected to fail but @moq/watch played it (update docs/interop.md and this script)" ;;
    esac
    if ! grep -q -- "$3" "$work/watch-$2.json" "$work/relay.log"; then
        tail -n "${RELAY_LOG_LINES:-20}" "$work/relay.log" >&2
        fail "$1: failed, but not with \"$3\""
    fi
    echo "expected failure: $1"
}

if [ "${EXPECTED_FAILURES:-1}" = 1 ]; then
    name="live/demo-19x.msf"
    echo "-- expected failure: draft 19: @moq/watch's @moq/net 0.2.8 writes SUBSCRIBER_PRIORITY as a varint (draft-19 §10.2.7: a uint8)"
    before="$(subscribe_namespaces)"
    viewer 19 "$name" 19x 6000
    await_viewer "$before"
    publish "$name" 19x
    wait "$viewer" || true
    expect_fail "draft 19" 19x "unknown message parameter 0x1b21"

    name="live/demo-late.msf"
    echo "-- expected failure: a viewer that joins after the catalog was published (draft 16): no catalog (no Joining FETCH)"
    publish "$name" late
    # Our own subscriber joins it first (it gets the catalog with a Joining FETCH): once it
    # writes the fMP4 header the catalog has been published, before @moq/watch asks for it.
    got="$(timeout 10 "$target/debug/moq" --url "moqt://localhost:$quic" --fingerprint "$fingerprint" \
        subscribe "$name" 2>>"$work/subscribe-late.log" | head -c 1 | wc -c)" || true
    [ "$got" = 1 ] || { cat "$work/subscribe-late.log" "$work/publish-late.log" >&2; fail "our subscriber did not get $name"; }
    viewer 16 "$name" late 6000
    wait "$viewer" || true
    expect_fail "late viewer" late "catalog loading, rendition none"

    if [ -x "${MOQ_FIREFOX:-/usr/bin/firefox-esr}" ]; then
        echo "-- expected failure: in Firefox ESR 140 @moq/watch's @moq/net 0.2.8 never uses WebTransport (connection/browser.js: any Firefox), and the cell turns its WebSocket fallback off"
        viewer 14 live/demo-firefox.msf firefox 6000 --browser firefox
        wait "$viewer" || true
        expect_fail "Firefox" firefox "WebTransport not supported"
    fi
fi
echo "watch-check: passed"
