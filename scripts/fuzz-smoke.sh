#!/usr/bin/env bash
# Fuzz smoke test for moq-core: runs each cargo-fuzz target in fuzz/ for a short while and
# fails if any target finds a crash.
#
# The toolchain is stable, so cargo-fuzz's nightly-only flags are enabled with
# RUSTC_BOOTSTRAP=1. Set FUZZ_SECONDS to change the time per target (default 30), and
# FUZZ_SANITIZER=none to build without AddressSanitizer.
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2
seconds="${FUZZ_SECONDS:-30}"
sanitizer="${FUZZ_SANITIZER:-address}"
targets=(control data_stream datagram)

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
    if cargo fuzz run --sanitizer "$sanitizer" "$t" -- \
        -max_total_time="$seconds" -print_final_stats=1; then
        echo "=== $t: no crash"
    else
        echo "=== $t: FAILED (see fuzz/artifacts/$t)" >&2
        failed+=("$t")
    fi
done

if ((${#failed[@]} > 0)); then
    echo "fuzz smoke failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz smoke passed: ${targets[*]}"
