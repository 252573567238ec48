#!/usr/bin/env bash
# Runs every test of the project: unit, integration and doc tests of the whole workspace, the
# examples, and a short fuzz smoke of every decoder entry point.
#
#   FUZZ_SECONDS=30   seconds per fuzz target (0 skips the fuzz smoke)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

step() { printf '\n==> %s\n' "$*"; }

step "cargo test (unit and integration tests, all targets)"
cargo test --workspace --all-targets

step "cargo test --doc"
cargo test --workspace --doc

step "demo"
cargo run --quiet --example demo

if [ "${FUZZ_SECONDS:-30}" != "0" ]; then
    step "fuzz smoke (${FUZZ_SECONDS:-30}s per target)"
    scripts/fuzz-smoke.sh
fi

step "all tests passed"
