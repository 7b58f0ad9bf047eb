#!/usr/bin/env bash
# Stress mode for the interop suites: runs every test binary that talks to a published
# moq-dev peer (the starling-interop suites, the QMux loopback against moq-tokio, the relay
# deciding through `moq auth serve`) RUNS times, PARALLEL
# copies at once, while LOAD busy loops (default: one per core) compete for the CPU, so the
# scheduler interleaves publishers, relays and subscribers in ways an idle machine never
# does. Every failing run's output is kept; the script exits non-zero when any run failed.
#
#   scripts/stress.sh [RUNS] [PARALLEL]          # defaults: 200 runs, 4 in parallel
#   LOAD=0 scripts/stress.sh 20 2                # no added load
#   BINARIES="moq_dev_via_starling_relay" scripts/stress.sh 200 4
#
# Results land in target/stress/: summary.txt, and <binary>-<run>.log for each failed run.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${1:-200}"
PARALLEL="${2:-4}"
LOAD="${LOAD:-$(nproc)}"
OUT=target/stress
BINARIES="${BINARIES:-moq_dev_via_starling_relay starling_fanout starling_via_moq_relay websocket_moq_tokio_via_starling websocket_starling_via_moq_relay cluster_mixed qmux_loopback auth_moq_serve}"

scripts/install-peers.sh >/dev/null
CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
export STARLING_MOQ_RELAY="${STARLING_MOQ_RELAY:-$CACHE/moq-relay-0.17.10/bin/moq-relay}"
export STARLING_MOQ_CLI="${STARLING_MOQ_CLI:-$CACHE/moq-cli-0.14.10/bin/moq}"

# Build the interop test binaries once and find their paths.
declare -A EXE
while IFS=$'\t' read -r name path; do
    EXE[$name]=$path
done < <(cargo test -p starling-interop -p starling-net -p starling-relay --locked --no-run \
    --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"] + "\t" + m["executable"])
')

rm -rf "$OUT"
mkdir -p "$OUT/runs"
jobs_file="$OUT/jobs"
: >"$jobs_file"
for name in $BINARIES; do
    if [ -z "${EXE[$name]:-}" ]; then
        echo "stress: no test binary named $name" >&2
        exit 2
    fi
    for run in $(seq 1 "$RUNS"); do
        echo "$name $run" >>"$jobs_file"
    done
done

# The added load: busy loops, ended when the script exits however it exits.
load_pids=()
stop_load() {
    for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_load EXIT
for _ in $(seq 1 "$LOAD"); do
    (while :; do :; done) &
    load_pids+=($!)
done

run_one() {
    local name="$1" run="$2" exe="$3" out="$4"
    local log="$out/runs/$name-$run.log"
    local started=$SECONDS
    if timeout 300 "$exe" >"$log" 2>&1; then
        echo "$name $run ok $((SECONDS - started))" >"$out/runs/$name-$run.result"
        rm -f "$log"
    else
        echo "$name $run FAILED $((SECONDS - started))" >"$out/runs/$name-$run.result"
        mv "$log" "$out/$name-$run.log"
    fi
}
export -f run_one

echo "stress: $RUNS runs of each of [$BINARIES], $PARALLEL at once, $LOAD busy loops"
started=$SECONDS
while read -r name run; do
    echo "$name $run ${EXE[$name]} $OUT"
done <"$jobs_file" | xargs -P "$PARALLEL" -n 4 bash -c 'run_one "$@"' _
elapsed=$((SECONDS - started))
stop_load

failed=0
{
    echo "stress: $RUNS runs x [$BINARIES], $PARALLEL in parallel, $LOAD busy loops, ${elapsed}s"
    for name in $BINARIES; do
        ok=$(cat "$OUT"/runs/"$name"-*.result 2>/dev/null | grep -c " ok " || true)
        bad=$(cat "$OUT"/runs/"$name"-*.result 2>/dev/null | grep -c " FAILED " || true)
        failed=$((failed + bad))
        printf '%-36s %5d passed, %d failed\n' "$name" "$ok" "$bad"
    done
} | tee "$OUT/summary.txt"
failed=$(grep -c " FAILED " <(cat "$OUT"/runs/*.result) || true)
if [ "$failed" -gt 0 ]; then
    echo "stress: $failed failed runs; their logs are in $OUT/" >&2
    ls "$OUT"/*.log >&2
    exit 1
fi
echo "stress: 0 failures"
