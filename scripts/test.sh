#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs the reference peers (cached under
# $HOME/.cache/starling), then checks formatting and lints, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# A fresh checkout builds everything once: incremental state would only take disk (CI's
# disk is what ran out before, with ~40 test binaries).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

scripts/install-peers.sh
CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
export STARLING_MOQ_RELAY="$CACHE/moq-relay-0.17.10/bin/moq-relay"
export STARLING_MOQ_CLI="$CACHE/moq-cli-0.14.10/bin/moq"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
(set -e; scripts/install-browser.sh; node --test tests/browser/*.test.mjs)
