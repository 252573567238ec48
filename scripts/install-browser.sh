#!/usr/bin/env bash
# Installs the browser interop harness (web/driver.mjs) outside the repository, pinned and
# idempotent, into ${MOQ_BROWSER:-$HOME/.cache/moq-browser}:
#
#   chromium              Debian's package (/usr/bin/chromium), apt-get install when missing;
#                         apt-get update first only when the package lists offer no Chromium 156+
#                         or the install fails (stale lists give 148); Playwright 1.64 drives
#                         Chromium 156, another major gets a warning. An existing
#                         /usr/bin/chromium is left alone (upgrade it with apt yourself).
#   firefox-esr           Debian's package (/usr/bin/firefox-esr, ESR 153; 140 before), apt-get install when
#                         missing, the same way; puppeteer-core 24.43 drives it over WebDriver
#                         BiDi, another ESR major gets a warning. Cold: 16 s, 83 MB download,
#                         322 MB on disk.
#   node_modules/         `npm ci` of web/package.json + web/package-lock.json (exact pins:
#                         @moq/net 0.3.4, @moqt/transport 0.5.7, @moqt/webtransport 0.5.7,
#                         @moq/watch 0.4.6, playwright-core 1.64.1, puppeteer-core 24.43.1,
#                         esbuild 0.28.2), rerun only
#                         when the lock's hash changes (stamps/npm)
#   dist/                 the page-side cells bundled by esbuild, one bundle per client library
#                         (moq-net.js from web/cells/moq-net.js, moqt.js from web/cells/moqt.js,
#                         moq-watch.js from web/cells/moq-watch.js);
#                         rebuilt on every run (well under a second)
#   src/cells/            the copy of web/cells esbuild bundles from (so the cache's
#                         node_modules resolves the imports)
#   logs/                 npm.log, apt-chromium.log, apt-firefox-esr.log, esbuild.log of the
#                         last run; timings.txt one line a run
#
# Usage: scripts/install-browser.sh [--force]    (--force: npm ci even when the stamp matches)
# Env: MOQ_BROWSER (install root), MOQ_BROWSERS (which browsers to install, default
# "chromium firefox"), MOQ_CHROMIUM (default /usr/bin/chromium), MOQ_FIREFOX (default
# /usr/bin/firefox-esr).
# Needs: node + npm (Node 20+), root or sudo for apt-get, network access to the npm registry
# (and Debian's apt mirror when a browser is missing). Exits non-zero, naming the failed step.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WEB="$ROOT/web"
MOQ_BROWSER="${MOQ_BROWSER:-$HOME/.cache/moq-browser}"
CHROMIUM="${MOQ_CHROMIUM:-/usr/bin/chromium}"
CHROMIUM_MAJOR_EXPECTED=156
FIREFOX="${MOQ_FIREFOX:-/usr/bin/firefox-esr}"
FIREFOX_MAJOR_EXPECTED=153  # Debian moved firefox-esr from ESR 140 to 153 (2026-12); both run the cells
BROWSERS="${MOQ_BROWSERS:-chromium firefox}"
STAMPS="$MOQ_BROWSER/stamps"
LOGS="$MOQ_BROWSER/logs"

force=0
case "${1:-}" in
    --force) force=1 ;;
    "") ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "install-browser: unknown argument: $1 (try --help)" >&2; exit 2 ;;
esac

die() {
    echo "install-browser: FAILED: $*" >&2
    exit 1
}

mkdir -p "$MOQ_BROWSER" "$STAMPS" "$LOGS"
timings=()
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# --- 1. Chromium -----------------------------------------------------------------------------
case " $BROWSERS " in *" chromium "*) want_chromium=1 ;; *) want_chromium=0 ;; esac
case " $BROWSERS " in *" firefox "*) want_firefox=1 ;; *) want_firefox=0 ;; esac
for b in $BROWSERS; do
    case "$b" in chromium|firefox) ;; *) die "MOQ_BROWSERS: unknown browser $b (chromium, firefox)" ;; esac
done
sudo_for_apt() { # what is missing: sets $SUDO, or dies
    command -v apt-get >/dev/null || die "$1 is missing and apt-get is not available"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || die "$1 is missing: run as root or install it (apt-get install $1)"
        SUDO="sudo"
    fi
}
# Another apt-get (another install script) may hold dpkg's lock: wait for it.
APT_LOCK=(-o DPkg::Lock::Timeout=600)

# One browser: NAME PACKAGE EXECUTABLE MAJOR DRIVER. Installs Debian's PACKAGE with apt-get when
# EXECUTABLE (the package's own path) is missing: apt-get update first when the package lists
# offer a major below MAJOR (stale lists: Chromium 148 for 156) or when the install fails. Then
# warns when the installed major is not MAJOR (the one DRIVER was validated with).
browser_step() {
    local name="$1" pkg="$2" exe="$3" want="$4" driver="$5" logf="$LOGS/apt-$2.log" step candidate version major
    t=$(now)
    if [ -x "$exe" ]; then
        step="present"
    else
        [ "$exe" = "/usr/bin/$pkg" ] || die "$exe does not exist (only /usr/bin/$pkg is installed by this script)"
        sudo_for_apt "$pkg"
        echo "install-browser: installing $pkg with apt-get (log: $logf)"
        export DEBIAN_FRONTEND=noninteractive
        candidate="$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: \([0-9]*\)\..*/\1/p')"
        if [ "${candidate:-0}" -lt "$want" ] \
            || ! $SUDO apt-get install -y --no-install-recommends "${APT_LOCK[@]}" "$pkg" >"$logf" 2>&1; then
            echo "install-browser: apt candidate is $name ${candidate:-none} (want $want) or the install failed: apt-get update, then install"
            { $SUDO apt-get update "${APT_LOCK[@]}" && $SUDO apt-get install -y --no-install-recommends "${APT_LOCK[@]}" "$pkg"; } >>"$logf" 2>&1 \
                || { tail -n 20 "$logf" >&2; die "apt-get install $pkg (see $logf)"; }
        fi
        [ -x "$exe" ] || die "apt-get installed $pkg but $exe is missing"
        step="apt-get install"
    fi
    version="$("$exe" --version 2>/dev/null | head -n 1)" || die "$exe --version failed"
    major="$(sed -n 's/^[^0-9]*\([0-9][0-9]*\)\..*/\1/p' <<<"$version")"
    if [ "$major" != "$want" ]; then
        echo "install-browser: warning: $version, the harness was validated with $name $want ($driver)" >&2
    fi
    timings+=("$name=$(since "$t")s($step)")
    echo "install-browser: $name: $version ($step, $(since "$t") s)"
}
if [ "$want_chromium" = 1 ]; then
    browser_step chromium chromium "$CHROMIUM" "$CHROMIUM_MAJOR_EXPECTED" "playwright-core 1.64.1"
fi

# --- 1b. Firefox ESR --------------------------------------------------------------------------
if [ "$want_firefox" = 1 ]; then
    browser_step firefox firefox-esr "$FIREFOX" "$FIREFOX_MAJOR_EXPECTED" "puppeteer-core 24.43.1"
fi

# --- 2. npm ci ---------------------------------------------------------------------------------
t=$(now)
command -v node >/dev/null || die "node is not installed (Node 20+ needed)"
command -v npm >/dev/null || die "npm is not installed"
[ -f "$WEB/package.json" ] && [ -f "$WEB/package-lock.json" ] || die "$WEB/package.json or package-lock.json missing"
lock_hash="$(cat "$WEB/package.json" "$WEB/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ "$force" = 0 ] && [ -f "$STAMPS/npm" ] && [ "$(cat "$STAMPS/npm")" = "$lock_hash" ] \
    && [ -d "$MOQ_BROWSER/node_modules/playwright-core" ] && [ -d "$MOQ_BROWSER/node_modules/puppeteer-core" ]; then
    npm_step="up to date"
else
    cp "$WEB/package.json" "$WEB/package-lock.json" "$MOQ_BROWSER/"
    rm -f "$STAMPS/npm"
    echo "install-browser: npm ci in $MOQ_BROWSER (log: $LOGS/npm.log)"
    (cd "$MOQ_BROWSER" && npm ci --no-audit --no-fund) >"$LOGS/npm.log" 2>&1 \
        || { tail -n 30 "$LOGS/npm.log" >&2; die "npm ci (see $LOGS/npm.log)"; }
    echo "$lock_hash" >"$STAMPS/npm"
    npm_step="npm ci"
fi
timings+=("npm=$(since "$t")s($npm_step)")
echo "install-browser: npm packages: $npm_step ($(since "$t") s)"

# --- 3. esbuild ----------------------------------------------------------------------------------
t=$(now)
ESBUILD="$MOQ_BROWSER/node_modules/.bin/esbuild"
[ -x "$ESBUILD" ] || die "$ESBUILD missing (npm ci did not install esbuild; try --force)"
rm -rf "$MOQ_BROWSER/src"
mkdir -p "$MOQ_BROWSER/src"
cp -r "$WEB/cells" "$MOQ_BROWSER/src/cells"
rm -rf "$MOQ_BROWSER/dist.new"
"$ESBUILD" "$MOQ_BROWSER/src/cells/moq-net.js" "$MOQ_BROWSER/src/cells/moqt.js" "$MOQ_BROWSER/src/cells/moq-watch.js" \
    --bundle --format=esm --platform=browser --target=chrome120,firefox128 --sourcemap \
    --log-level=warning --outdir="$MOQ_BROWSER/dist.new" >"$LOGS/esbuild.log" 2>&1 \
    || { cat "$LOGS/esbuild.log" >&2; die "esbuild (see $LOGS/esbuild.log)"; }
rm -rf "$MOQ_BROWSER/dist"
mv "$MOQ_BROWSER/dist.new" "$MOQ_BROWSER/dist"
sizes="$(cd "$MOQ_BROWSER/dist" && for f in *.js; do printf '%s %sK ' "$f" "$(( $(stat -c %s "$f") / 1024 ))"; done)"
timings+=("esbuild=$(since "$t")s")
echo "install-browser: bundles: $MOQ_BROWSER/dist: $sizes($(since "$t") s)"

echo "$(date -u +%FT%TZ) ${timings[*]}" >>"$LOGS/timings.txt"
echo "install-browser: ok: node $ROOT/web/driver.mjs --help"
