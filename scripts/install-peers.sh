#!/usr/bin/env bash
# Installs the third-party MOQT implementations used as interop peers, pinned, into a cache
# outside the repository (default ~/.cache/moq-peers, override with MOQ_PEERS):
#
#   aiomoqt 0.13.3          (PyPI, Python 3.12 venv)  moq-interop-relay, moq-interop-client
#   moq-relay 0.17.10       (crates.io, moq-dev)      moq-relay   [--no-default-features --features noq,websocket]
#   moq-clock 0.10.21       (crates.io, moq-dev)      moq-clock
#   moq-token-cli 0.5.48    (crates.io, moq-dev)      moq-token (mints and verifies relay tokens)
#   moq-relay-ietf 0.8.0    (crates.io, Cloudflare)   moq-relay-ietf    } one cargo install,
#   moq-clock-ietf 0.6.25   (crates.io, Cloudflare)   moq-clock-ietf    } draft-18 only
#   moq-test-client 0.2.0   (crates.io, Cloudflare)   moq-test-client   } (interop test client)
#   moq-pub 0.10.0          (crates.io, Cloudflare)   moq-pub           } (fMP4 from stdin -> WARP-style
#                                                                          catalog + CMAF tracks)
#   moq-sub 0.5.0           (crates.io, Cloudflare)   moq-sub           } (the reverse, fMP4 to stdout)
# Cloudflare's older deployed stack, same binary names, so each pair gets its own cargo root:
#   moq-relay-ietf 0.7.9    (crates.io, Cloudflare)   cargo-ietf14/bin/moq-relay-ietf } draft-14
#   moq-clock-ietf 0.6.15   (crates.io, Cloudflare)   cargo-ietf14/bin/moq-clock-ietf } (ALPN moq-00)
#   moq-relay-ietf 0.7.31   (crates.io, Cloudflare)   cargo-ietf16/bin/moq-relay-ietf } draft-16
#   moq-clock-ietf 0.6.24   (crates.io, Cloudflare)   cargo-ietf16/bin/moq-clock-ietf } (ALPN moqt-16)
#
# Layout of $MOQ_PEERS:
#   bin/              symlinks to the peer binaries only (what scripts/peers.env puts on PATH);
#                     the older Cloudflare pairs as moq-{relay,clock}-ietf14 / -ietf16
#   venv/bin/         aiomoqt's venv (moq-interop-relay, moq-interop-client, python)
#   cargo/bin/        the cargo-installed binaries (cargo install --root)
#   cargo-ietf14/bin/ moq-relay-ietf 0.7.9 + moq-clock-ietf 0.6.15 (their own --root)
#   cargo-ietf16/bin/ moq-relay-ietf 0.7.31 + moq-clock-ietf 0.6.24 (their own --root)
#   target/           shared CARGO_TARGET_DIR (all cargo roots), so builds reuse artifacts;
#                     removed once every peer is installed (it is ~2.5 GB)
#   stamps/STEP       what was installed by a step (spec line); a step is skipped when its stamp
#                     matches, `cargo install --list` records the pinned versions, and every
#                     binary answers --version with that version (--help for the Cloudflare ones,
#                     which have no --version)
#   logs/STEP.log     full output of the last run of a step; logs/timings.txt one line per run
#
# Usage: scripts/install-peers.sh [--force] [--only STEP[,STEP...]] [--list] [STEP...]
#   steps: aiomoqt moq-relay moq-clock moq-ietf moq-ietf14 moq-ietf16
#   STEP...   same as --only (e.g. scripts/install-peers.sh moq-ietf14 moq-ietf16)
#   --force   reinstall even when the stamp and versions match
# Env: MOQ_PEERS (install root), PYTHON312 (explicit python3.12 binary), CARGO_BUILD_JOBS.
#
# Every step runs even when an earlier one failed; the script exits non-zero at the end, naming
# the failed steps and the tail of their logs. Afterwards: `source scripts/peers.env`.
# Needs network access to crates.io and PyPI only; no system packages are required on the
# project's Debian image (rustls with aws-lc-rs builds with the C compiler, no cmake/openssl).
set -euo pipefail

MOQ_PEERS="${MOQ_PEERS:-$HOME/.cache/moq-peers}"
export CARGO_TARGET_DIR="$MOQ_PEERS/target"
CARGO_ROOT="$MOQ_PEERS/cargo"
VENV="$MOQ_PEERS/venv"
STAMPS="$MOQ_PEERS/stamps"
LOGS="$MOQ_PEERS/logs"

AIOMOQT_VERSION=0.13.3
MOQ_RELAY_VERSION=0.17.10
MOQ_CLOCK_VERSION=0.10.21
MOQ_TOKEN_VERSION=0.5.48
MOQ_RELAY_IETF_VERSION=0.8.0
MOQ_CLOCK_IETF_VERSION=0.6.25
MOQ_TEST_CLIENT_VERSION=0.2.0
MOQ_PUB_VERSION=0.10.0
MOQ_SUB_VERSION=0.5.0
# Cloudflare's older stack (moq-transport 0.12-0.14: draft-14; moq-transport 0.16: draft-16).
CARGO_ROOT_IETF14="$MOQ_PEERS/cargo-ietf14"
MOQ_RELAY_IETF14_VERSION=0.7.9
MOQ_CLOCK_IETF14_VERSION=0.6.15
CARGO_ROOT_IETF16="$MOQ_PEERS/cargo-ietf16"
MOQ_RELAY_IETF16_VERSION=0.7.31
MOQ_CLOCK_IETF16_VERSION=0.6.24

ALL_STEPS=(aiomoqt moq-relay moq-clock moq-token moq-ietf moq-ietf14 moq-ietf16)
force=0
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1 ;;
        --only) only="${2:?--only needs a step list}"; shift ;;
        --only=*) only="${1#--only=}" ;;
        --list) printf '%s\n' "${ALL_STEPS[@]}"; exit 0 ;;
        -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        -*) echo "install-peers: unknown argument: $1 (try --help)" >&2; exit 2 ;;
        *) only="${only:+$only,}$1" ;;
    esac
    shift
done
steps=("${ALL_STEPS[@]}")
if [ -n "$only" ]; then
    IFS=',' read -r -a steps <<<"$only"
    for s in "${steps[@]}"; do
        case " ${ALL_STEPS[*]} " in *" $s "*) ;; *) echo "install-peers: unknown step '$s' (steps: ${ALL_STEPS[*]})" >&2; exit 2 ;; esac
    done
fi

mkdir -p "$MOQ_PEERS" "$CARGO_ROOT" "$STAMPS" "$LOGS" "$CARGO_TARGET_DIR"

say() { printf '==> %s\n' "$*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { s = b - a; printf "%dm%02ds (%.1fs)", s / 60, s % 60, s }'; }

# ---- up-to-date checks ----------------------------------------------------------------------

# stamp_ok STEP SPEC: the stamp of STEP records exactly SPEC.
stamp_ok() { [ "$force" = 0 ] && [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }

# bin_has_version BIN VERSION [ROOT]: cargo's install record (cargo install --list) in ROOT
# (default $CARGO_ROOT) has package BIN at VERSION, and the binary runs: its --version output
# names VERSION, or, for the binaries that have no --version flag (moq-relay-ietf,
# moq-clock-ietf, moq-test-client, moq-pub, moq-sub), --help succeeds.
bin_has_version() {
    # $1 is the binary, or BINARY@PACKAGE when the crate is named otherwise.
    local root="${3:-$CARGO_ROOT}"
    local name="${1%@*}" pkg="${1#*@}"
    local bin="$root/bin/$name" out
    [ -x "$bin" ] || return 1
    cargo install --list --root "$root" 2>/dev/null | grep -qxF -- "$pkg v$2:" || return 1
    if out="$("$bin" --version 2>&1 </dev/null)"; then
        grep -qwF -- "$2" <<<"$out"
    else
        "$bin" --help >/dev/null 2>&1 </dev/null
    fi
}

# ---- Python 3.12 ----------------------------------------------------------------------------

# Finds a python3.12 binary without relying on the user's shell setup (no shims, no pyenv init).
find_python312() {
    local cand root
    if [ -n "${PYTHON312:-}" ]; then
        [ -x "$PYTHON312" ] && { echo "$PYTHON312"; return 0; }
        echo "install-peers: PYTHON312=$PYTHON312 is not executable" >&2; return 1
    fi
    local roots=()
    [ -n "${PYENV_ROOT:-}" ] && roots+=("$PYENV_ROOT")
    if command -v pyenv >/dev/null 2>&1; then roots+=("$(pyenv root 2>/dev/null || true)"); fi
    [ -x "$HOME/.pyenv/bin/pyenv" ] && roots+=("$("$HOME/.pyenv/bin/pyenv" root 2>/dev/null || true)")
    roots+=("$HOME/.pyenv")
    for root in "${roots[@]}"; do
        [ -n "$root" ] || continue
        # newest 3.12.x first
        for cand in $(ls -d "$root"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -t. -k3,3nr); do
            [ -x "$cand" ] && { echo "$cand"; return 0; }
        done
    done
    for cand in python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12; do
        cand="$(command -v "$cand" 2>/dev/null || true)"
        [ -n "$cand" ] && [ -x "$cand" ] && { echo "$cand"; return 0; }
    done
    return 1
}

# ---- steps ----------------------------------------------------------------------------------

step_aiomoqt() {
    local spec="aiomoqt==$AIOMOQT_VERSION python3.12"
    if stamp_ok aiomoqt "$spec" && [ -x "$VENV/bin/python" ] \
        && [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("aiomoqt"))' 2>/dev/null)" = "$AIOMOQT_VERSION" ] \
        && [ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = 3.12 ] \
        && [ -x "$VENV/bin/moq-interop-relay" ] && [ -x "$VENV/bin/moq-interop-client" ]; then
        return 10
    fi
    local py
    if ! py="$(find_python312)"; then
        echo "install-peers: no Python 3.12 found. Looked in \$PYTHON312, \$PYENV_ROOT, \`pyenv root\`," >&2
        echo "  ~/.pyenv/versions/3.12.*/bin/python3.12 and python3.12 on PATH." >&2
        echo "  Install one (e.g. \`pyenv install 3.12\`) or set PYTHON312=/path/to/python3.12." >&2
        return 1
    fi
    echo "python: $py ($("$py" --version 2>&1))"
    if [ -x "$VENV/bin/python" ] && [ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" != 3.12 ]; then
        echo "existing venv is not Python 3.12: recreating"; rm -rf "$VENV"
    fi
    [ -x "$VENV/bin/python" ] || "$py" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --disable-pip-version-check "aiomoqt==$AIOMOQT_VERSION"
    [ -x "$VENV/bin/moq-interop-relay" ] && [ -x "$VENV/bin/moq-interop-client" ] \
        || { echo "aiomoqt installed but moq-interop-relay/moq-interop-client are missing" >&2; return 1; }
    echo "$spec" >"$STAMPS/aiomoqt"
}

# cargo_step STEP SPEC 'bin:version ...' -- cargo install args...
# The cargo --root is $CARGO_ROOT unless STEP_ROOT is set (the older Cloudflare pairs, whose
# binaries have the same names as the current ones); CARGO_TARGET_DIR is shared by all roots.
cargo_step() {
    local step="$1" spec="$2" bins="$3" b ok=1 root="${STEP_ROOT:-$CARGO_ROOT}"
    shift 4
    if stamp_ok "$step" "$spec"; then
        for b in $bins; do bin_has_version "${b%%:*}" "${b#*:}" "$root" || ok=0; done
        [ "$ok" = 1 ] && return 10
    fi
    rm -f "$STAMPS/$step"
    mkdir -p "$root"
    echo "+ cargo install --root $root $*   (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    cargo install --root "$root" --force "$@"
    for b in $bins; do
        bin_has_version "${b%%:*}" "${b#*:}" "$root" || {
            echo "installed, but ${b%%:*} ${b#*:} does not check out (cargo install --list / --version / --help):" >&2
            cargo install --list --root "$root" >&2 || true
            b="${b%%:*}"
            "$root/bin/${b%@*}" --version >&2 || true
            return 1
        }
    done
    echo "$spec" >"$STAMPS/$step"
}

step_moq-relay() {
    # No --locked: the published Cargo.lock pins crates (e.g. webpki-roots 1.0.11) that the
    # registry does not serve, so the lockfile cannot be used as is. `websocket`: its QMux over
    # WebSocket listener (--web-http-listen), which the interop matrix's ws cells dial.
    cargo_step moq-relay "moq-relay $MOQ_RELAY_VERSION --no-default-features --features noq,websocket" \
        "moq-relay:$MOQ_RELAY_VERSION" -- \
        moq-relay --version "$MOQ_RELAY_VERSION" --no-default-features --features noq,websocket
}

step_moq-clock() {
    cargo_step moq-clock "moq-clock $MOQ_CLOCK_VERSION --locked" \
        "moq-clock:$MOQ_CLOCK_VERSION" -- \
        moq-clock --version "$MOQ_CLOCK_VERSION" --locked
}

step_moq-token() {
    cargo_step moq-token "moq-token-cli $MOQ_TOKEN_VERSION --locked" \
        "moq-token@moq-token-cli:$MOQ_TOKEN_VERSION" -- \
        moq-token-cli --version "$MOQ_TOKEN_VERSION" --locked
}

step_moq-ietf() {
    # One command for the five so the shared crates (moq-transport, moq-native-ietf, ...) build
    # once (their published lockfiles pin the same versions; moq-pub adds only mp4 and a few small
    # crates, moq-sub nothing but itself). moq-test-client, moq-pub and moq-sub have no --version
    # flag either (checked with --help).
    cargo_step moq-ietf "moq-relay-ietf $MOQ_RELAY_IETF_VERSION moq-clock-ietf $MOQ_CLOCK_IETF_VERSION moq-test-client $MOQ_TEST_CLIENT_VERSION moq-pub $MOQ_PUB_VERSION moq-sub $MOQ_SUB_VERSION --locked" \
        "moq-relay-ietf:$MOQ_RELAY_IETF_VERSION moq-clock-ietf:$MOQ_CLOCK_IETF_VERSION moq-test-client:$MOQ_TEST_CLIENT_VERSION moq-pub:$MOQ_PUB_VERSION moq-sub:$MOQ_SUB_VERSION" -- \
        "moq-relay-ietf@$MOQ_RELAY_IETF_VERSION" "moq-clock-ietf@$MOQ_CLOCK_IETF_VERSION" \
        "moq-test-client@$MOQ_TEST_CLIENT_VERSION" "moq-pub@$MOQ_PUB_VERSION" "moq-sub@$MOQ_SUB_VERSION" --locked
}

step_moq-ietf14() {
    # Draft-14 pair in its own root (same binary names as moq-ietf's); one command for both.
    STEP_ROOT="$CARGO_ROOT_IETF14" cargo_step moq-ietf14 \
        "moq-relay-ietf $MOQ_RELAY_IETF14_VERSION moq-clock-ietf $MOQ_CLOCK_IETF14_VERSION --locked root=cargo-ietf14" \
        "moq-relay-ietf:$MOQ_RELAY_IETF14_VERSION moq-clock-ietf:$MOQ_CLOCK_IETF14_VERSION" -- \
        "moq-relay-ietf@$MOQ_RELAY_IETF14_VERSION" "moq-clock-ietf@$MOQ_CLOCK_IETF14_VERSION" --locked
}

step_moq-ietf16() {
    # Draft-16 pair in its own root.
    STEP_ROOT="$CARGO_ROOT_IETF16" cargo_step moq-ietf16 \
        "moq-relay-ietf $MOQ_RELAY_IETF16_VERSION moq-clock-ietf $MOQ_CLOCK_IETF16_VERSION --locked root=cargo-ietf16" \
        "moq-relay-ietf:$MOQ_RELAY_IETF16_VERSION moq-clock-ietf:$MOQ_CLOCK_IETF16_VERSION" -- \
        "moq-relay-ietf@$MOQ_RELAY_IETF16_VERSION" "moq-clock-ietf@$MOQ_CLOCK_IETF16_VERSION" --locked
}

# ---- main -----------------------------------------------------------------------------------

if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi

say "installing MOQT interop peers into $MOQ_PEERS (steps: ${steps[*]})"
failed=()
summary=()
t_all="$(now)"
for s in "${steps[@]}"; do
    log="$LOGS/$s.log"
    say "[$s] start $(date '+%H:%M:%S') (log: $log)"
    t0="$(now)"
    set +e
    ( set -euo pipefail; "step_$s" ) >"$log" 2>&1
    rc=$?
    set -e
    t1="$(now)"
    took="$(elapsed "$t0" "$t1")"
    case "$rc" in
        0)  say "[$s] installed in $took"; summary+=("$s: installed in $took")
            echo "$(date -Is) $s installed $took" >>"$LOGS/timings.txt" ;;
        10) say "[$s] up to date, skipped ($took)"; summary+=("$s: up to date") ;;
        *)  say "[$s] FAILED (exit $rc) after $took; last lines of $log:"
            tail -n 40 "$log" | sed 's/^/    | /'
            summary+=("$s: FAILED (exit $rc), see $log"); failed+=("$s")
            echo "$(date -Is) $s FAILED $took" >>"$LOGS/timings.txt" ;;
    esac
done

# Symlink every installed peer binary into $MOQ_PEERS/bin (not the venv's python/pip); the
# older Cloudflare pairs under their draft-suffixed names (moq-relay-ietf14, moq-clock-ietf16...).
mkdir -p "$MOQ_PEERS/bin"
for b in "$VENV/bin/moq-interop-relay" "$VENV/bin/moq-interop-client" \
    "$CARGO_ROOT/bin/moq-relay" "$CARGO_ROOT/bin/moq-clock" "$CARGO_ROOT/bin/moq-token" \
    "$CARGO_ROOT/bin/moq-relay-ietf" "$CARGO_ROOT/bin/moq-clock-ietf" "$CARGO_ROOT/bin/moq-test-client" "$CARGO_ROOT/bin/moq-pub" "$CARGO_ROOT/bin/moq-sub" \
    "$CARGO_ROOT_IETF14/bin/moq-relay-ietf=moq-relay-ietf14" "$CARGO_ROOT_IETF14/bin/moq-clock-ietf=moq-clock-ietf14" \
    "$CARGO_ROOT_IETF16/bin/moq-relay-ietf=moq-relay-ietf16" "$CARGO_ROOT_IETF16/bin/moq-clock-ietf=moq-clock-ietf16"; do
    name="$(basename "$b")"
    case "$b" in *=*) name="${b#*=}"; b="${b%%=*}" ;; esac
    if [ -x "$b" ]; then ln -sfn "$b" "$MOQ_PEERS/bin/$name"; else rm -f "$MOQ_PEERS/bin/$name"; fi
done

say "summary (total $(elapsed "$t_all" "$(now)")):"
printf '    %s\n' "${summary[@]}"
say "binaries: $MOQ_PEERS/bin: $(ls "$MOQ_PEERS/bin" | tr '\n' ' ')"
say "put them on PATH with: . scripts/peers.env"
if [ "${#failed[@]}" -gt 0 ]; then
    say "FAILED steps: ${failed[*]}" >&2
    exit 1
fi
# Every peer is installed: the shared build directory (~2.5 GB) is only needed to build a
# changed pin again, so it goes, to keep a CI machine's disk free for our own build.
if [ -d "$CARGO_TARGET_DIR" ]; then
    say "removing the peers' build directory $CARGO_TARGET_DIR ($(du -sh "$CARGO_TARGET_DIR" | cut -f1))"
    rm -rf "$CARGO_TARGET_DIR"
fi
