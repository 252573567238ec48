#!/usr/bin/env bash
# Lints the workspace against the newest compatible dependency versions, as a user who depends
# on these crates by path (or a fresh `cargo add`) resolves them, not against the committed
# Cargo.lock: a new release that deprecates something we call fails here with -D warnings before
# it warns in every user's build (rustls 0.23.48 deprecating `ring::default_provider` did).
#
# The tree is copied to a scratch directory whose own lockfile `cargo update` rewrites (to the
# newest versions compatible with the workspace's rust-version); the committed Cargo.lock is
# never touched. The build reuses the main target directory: updated crates and their dependents
# are new artifacts beside the existing ones (their hashes differ), and only metadata is built
# (`cargo clippy`), so the test binaries of the main build stay as they are; the workspace's own
# crates are re-checked by the next main `cargo clippy` (a few seconds).
#
#   FRESH_DEPS=0   skips this check
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "${FRESH_DEPS:-1}" = "0" ]; then
    echo "==> fresh dependencies: skipped (FRESH_DEPS=0)"
    exit 0
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/moq-fresh-deps.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

# Everything but build output, VCS state and the fuzz crate (outside the workspace).
tar -C "$root" --exclude=./target --exclude=./.git --exclude=./fuzz --exclude=node_modules \
    -cf - . | tar -C "$scratch" -xf -

target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

cd "$scratch"
echo "==> fresh dependencies: cargo update (scratch copy, committed Cargo.lock untouched)"
cargo update 2>&1 | sed 's/^/    /'

echo "==> fresh dependencies: cargo clippy --workspace --all-targets -D warnings"
CARGO_TARGET_DIR="$target" \
    cargo clippy --locked --workspace --all-targets -- -D warnings
