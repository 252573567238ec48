#!/usr/bin/env bash
# Fuzz smoke test: runs each cargo-fuzz target in fuzz/ for a short while and fails if any
# target finds a crash. control, data_stream and datagram fuzz moq-core's decoders; session
# fuzzes a moq-transport session facing a scripted peer over the in-memory transport (it also
# fails on a session or handle that does not end, or on unbounded growth).
#
# The toolchain is stable, so cargo-fuzz's nightly-only flags are enabled with
# RUSTC_BOOTSTRAP=1. Set FUZZ_SECONDS to change the time per target (default 30), and
# FUZZ_SANITIZER=none to build without AddressSanitizer, and FUZZ_CLEAN=1 to remove the fuzz
# build (fuzz/target, ~1.3 GB) afterwards, as CI does.
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2
seconds="${FUZZ_SECONDS:-30}"
sanitizer="${FUZZ_SANITIZER:-address}"
targets=(control data_stream datagram session)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

export RUSTC_BOOTSTRAP=1
failed=()
for t in "${targets[@]}"; do
    echo "=== fuzzing $t for ${seconds}s (sanitizer: $sanitizer)"
    mkdir -p "corpus/$t"
    # Committed seeds (fuzz/seeds/TARGET) are read alongside the corpus, which is not
    # committed; new inputs go to the corpus.
    seeds=()
    if [[ -d "seeds/$t" ]]; then
        seeds=("seeds/$t")
    fi
    if cargo fuzz run --sanitizer "$sanitizer" "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$seconds" -print_final_stats=1; then
        echo "=== $t: no crash"
    else
        echo "=== $t: FAILED (see fuzz/artifacts/$t)" >&2
        failed+=("$t")
    fi
done

if [[ "${FUZZ_CLEAN:-0}" == "1" ]]; then
    rm -rf target
fi
if ((${#failed[@]} > 0)); then
    echo "fuzz smoke failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz smoke passed: ${targets[*]}"
