#!/usr/bin/env bash
# The hostile fleet at full size (issue 25): CONNECTIONS connections (default 400; raw QUIC
# from ten addresses of 127.0.0.0/8, and the same number over WebSocket), each filling its
# window with 640 streams stuck inside 60 KiB group headers, against a `starling relay`
# process on its default flags (the receive budget is then a quarter of the host's memory
# limit). Each case asserts the relay's RSS grows by at most the receive budget plus
# 256 MiB, its peak stays within the budget, the hostile sessions still answer and an honest
# publisher/subscriber pair keeps receiving. The suite runs the same cases with 40
# connections and `--receive-budget 32MiB` (crates/starling/tests/hostile_fleet.rs).
# CASES picks other fleet cases of that file and hostile_fleet_state.rs by name (a cargo test
# filter, e.g. `announcing`, `request_floods`, `one_byte`, `frames`; an empty CASES runs every
# one), each at CONNECTIONS.
#
#   scripts/hostile-fleet.sh                      # 400 connections, default flags
#   CONNECTIONS=100 BUDGET=256MiB scripts/hostile-fleet.sh
#   CASES=announcing CONNECTIONS=400 scripts/hostile-fleet.sh
#
# Release builds; the output (one "... fleet:" or "fleet flood:" line per case with its
# figures) is also written to target/hostile-fleet.log.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS="${CONNECTIONS:-400}"
BUDGET="${BUDGET:-default}"
CASES="${CASES-stuck_inside_headers}"
mkdir -p target
FLEET_CONNECTIONS="$CONNECTIONS" FLEET_BUDGET="$BUDGET" \
    cargo test --release --locked -p starling --test hostile_fleet --test hostile_fleet_state $CASES -- --nocapture --test-threads 1 2>&1 |
    tee target/hostile-fleet.log | grep -E "fleet flood|fleet:|^test |panicked|test result"
