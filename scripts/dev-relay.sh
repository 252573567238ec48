# Sourced by media-check.sh and watch-check.sh: starts our relay binary
# ($target/debug/moq-relay, development certificate, no auth) on two free loopback ports, UDP
# for QUIC and WebTransport and TCP for its HTTP side, and waits for it to answer.
#
# Needs: $target, $work (logs go to $work/relay.log), the array pids (the relay's pid is
# appended, for the caller's cleanup) and a function fail. Sets quic, http and fingerprint.
start_dev_relay() {
    read -r quic http < <(python3 -c '
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
t = socket.socket(); t.bind(("127.0.0.1", 0))
print(u.getsockname()[1], t.getsockname()[1])')
    "$target/debug/moq-relay" --bind "127.0.0.1:$quic" --tls-generate localhost \
        --http "127.0.0.1:$http" --auth-disabled >"$work/relay.log" 2>&1 &
    pids+=($!)
    fingerprint=""
    for _ in $(seq 100); do
        fingerprint="$(curl -fsS "http://127.0.0.1:$http/fingerprint" 2>/dev/null)" && break
        sleep 0.1
    done
    [ -n "$fingerprint" ] || { cat "$work/relay.log" >&2; fail "the relay did not start"; }
}
