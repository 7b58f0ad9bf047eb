#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs the reference peers (cached under
# $HOME/.cache/starling) and the browser suite's Chromium and npm packages, checks formatting
# and lints, builds every cargo-fuzz target, then runs every test. Every group runs to its
# end and every failing test binary is reported (cargo's --no-fail-fast), so one failure
# cannot hide another; the exit status is non-zero when any group failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# A fresh checkout builds everything once: incremental state would only take disk (CI's
# disk is what ran out before, with ~40 test binaries).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

started=$SECONDS
failed=()
group() {
    local name="$1"
    shift
    local t0=$SECONDS
    echo "=== $name"
    if "$@"; then
        echo "=== $name: ok ($((SECONDS - t0)) s)"
    else
        echo "=== $name: FAILED ($((SECONDS - t0)) s)"
        failed+=("$name")
    fi
}

# The multi-host cluster tests (crates/starling/tests/netns.rs) build network namespaces
# with iproute2's `ip` and `tc`. Installed first, before the browser install's apt runs.
if [ "$(id -u)" -eq 0 ] && ! { command -v ip && command -v tc; } >/dev/null; then
    group "install iproute2" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2'
fi
# The media tests (crates/interop/tests/media.rs) encode and decode with Debian's ffmpeg.
if ! command -v ffmpeg >/dev/null; then
    group "install ffmpeg" scripts/install-ffmpeg.sh
fi

# Chromium comes from Debian and the page's packages from npm: mostly waiting on the
# network, so it runs beside the Rust build instead of after it.
mkdir -p target
scripts/install-browser.sh >target/install-browser.log 2>&1 &
browser_install=$!

group "install reference peers" scripts/install-peers.sh
CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
export STARLING_MOQ_RELAY="$CACHE/moq-relay-0.17.10/bin/moq-relay"
export STARLING_MOQ_CLI="$CACHE/moq-cli-0.14.10/bin/moq"

group "cargo fmt" cargo fmt --all -- --check
group "cargo clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
group "cargo test" cargo test --workspace --locked --no-fail-fast
# The simulations (session mesh, whole relays) find a bug planted on purpose and replay its seed
# (crates/session/src/faults.rs; the feature is off in every other build).
planted() {
    cargo clippy -p starling-session -p starling-relay --features faults --all-targets --locked -- -D warnings &&
        cargo test -p starling-session --features faults --locked --test simulation planted &&
        cargo test -p starling-relay --features faults --locked --test simulation planted
}
group "planted bug" planted

# Every cargo-fuzz target is built (nightly, exactly as scripts/fuzz.sh builds it to run it,
# installing the nightly toolchain and cargo-fuzz when missing), so none can stop compiling
# unnoticed. After the Rust tests rather than beside them: on two cores a second heavy build
# would slow the timing-sensitive tests it overlapped.
fuzz_build() {
    local ok=0
    scripts/fuzz.sh --build >target/fuzz-build.log 2>&1 || ok=$?
    if [ "$ok" -eq 0 ]; then
        grep '^fuzz: built' target/fuzz-build.log
    else
        tail -n 60 target/fuzz-build.log
        echo "(the whole log: target/fuzz-build.log)"
    fi
    return "$ok"
}
group "fuzz targets build" fuzz_build

browser() {
    local ok=0
    wait "$browser_install" || ok=$?
    cat target/install-browser.log
    [ "$ok" -eq 0 ] && node --test tests/browser/*.test.mjs
}
group "browser tests" browser

echo "=== test.sh: $((SECONDS - started)) s"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "=== FAILED: ${failed[*]}"
    exit 1
fi
echo "=== all groups passed"
