#!/usr/bin/env bash
# Stress mode for the interop suites: runs every test binary that talks to a published
# moq-dev peer RUNS times, PARALLEL copies at once, while LOAD busy loops (default: one per
# core) compete for the CPU, so the scheduler interleaves publishers, relays and subscribers
# in ways an idle machine never does. Every failing run's output is kept; the script exits
# non-zero when any run failed.
#
# The binaries are found, not listed by hand, so a new suite joins by itself: every test
# target of starling-interop and of any other workspace package that depends on a moq-dev
# crate (moq-net, moq-tokio, moq-native, moq-lite), and every other test target whose own
# source file names STARLING_MOQ_RELAY, STARLING_MOQ_CLI, moq_tokio, moq_native, moq_net:: or
# moq_lite:: (the relay deciding through `moq auth serve`, the token and key tests against
# the `moq` CLI, the QMux loopback with moq-tokio's parameters).
#
#   scripts/stress.sh [RUNS] [PARALLEL]          # defaults: 200 runs, 4 in parallel
#   scripts/stress.sh --list                     # only print the binaries found (or LIST=1)
#   LOAD=0 scripts/stress.sh 20 2                # no added load
#   BINARIES="moq_dev_via_starling_relay" scripts/stress.sh 200 4
#
# BINARIES, when set, replaces what is found with the test targets it names (any workspace
# test target). Results land in target/stress/: summary.txt, and <binary>-<run>.log for each
# failed run.
set -euo pipefail
cd "$(dirname "$0")/.."

LIST="${LIST:-0}"
args=()
for arg in "$@"; do
    case $arg in
        --list) LIST=1 ;;
        *) args+=("$arg") ;;
    esac
done
RUNS="${args[0]:-200}"
PARALLEL="${args[1]:-4}"
LOAD="${LOAD:-$(nproc)}"
OUT=target/stress

# The binaries, one a line: `name<TAB>package<TAB>why<TAB>manifest path`.
found=$(cargo metadata --format-version 1 --no-deps --locked | BINARIES="${BINARIES:-}" python3 -c '
import json, os, re, sys
meta = json.load(sys.stdin)
moq_dev = {"moq-net", "moq-tokio", "moq-native", "moq-lite"}
marker = re.compile(
    r"STARLING_MOQ_RELAY|STARLING_MOQ_CLI|\bmoq_tokio\b|\bmoq_native\b|\bmoq_net::|\bmoq_lite::")
wanted = os.environ["BINARIES"].split()
members = set(meta["workspace_members"])
rows = []
for package in meta["packages"]:
    if package["id"] not in members:
        continue
    talks_moq_dev = package["name"] == "starling-interop" or any(
        dep["name"] in moq_dev for dep in package["dependencies"])
    for target in package["targets"]:
        if "test" not in target["kind"]:
            continue
        name = target["name"]
        if wanted:
            why = "named in BINARIES" if name in wanted else None
        elif talks_moq_dev:
            why = "its package runs moq-dev crates"
        else:
            with open(target["src_path"], encoding="utf-8") as source:
                hit = marker.search(source.read())
            why = hit and "its source names " + hit.group(0)
        if why:
            rows.append((name, package["name"], why, package["manifest_path"]))
names = [row[0] for row in rows]
missing = [name for name in wanted if name not in names]
if missing:
    sys.exit("stress: no test target named " + " ".join(missing))
twice = sorted({name for name in names if names.count(name) > 1})
if twice:
    sys.exit("stress: test targets named alike in several packages: " + " ".join(twice))
for row in sorted(rows, key=lambda row: (row[1], row[0])):
    print("\t".join(row))
')
show() {
    printf '%s\n' "$found" | awk -F'\t' -v indent="$1" '{ printf "%s%-36s %-18s %s\n", indent, $1, $2, $3 }'
}
if [ "$LIST" = 1 ]; then
    show ""
    exit 0
fi
BINARIES=$(printf '%s\n' "$found" | cut -f1 | tr '\n' ' ')
BINARIES=${BINARIES% }
echo "stress: $(printf '%s\n' "$found" | wc -l) test binaries found:"
show "  "

scripts/install-peers.sh >/dev/null
CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
export STARLING_MOQ_RELAY="${STARLING_MOQ_RELAY:-$CACHE/moq-relay-0.17.10/bin/moq-relay}"
export STARLING_MOQ_CLI="${STARLING_MOQ_CLI:-$CACHE/moq-cli-0.14.10/bin/moq}"

# Build those test binaries once and find their paths.
build=(cargo test --locked --no-run --message-format=json)
for package in $(printf '%s\n' "$found" | cut -f2 | sort -u); do
    build+=(-p "$package")
done
for name in $BINARIES; do
    build+=(--test "$name")
done
mkdir -p target
"${build[@]}" >target/stress-build.json
declare -A EXE
while IFS=$'\t' read -r name path; do
    EXE[$name]=$path
done < <(printf '%s\n' "$found" | python3 -c '
import json, sys
wanted = {(row.split("\t")[0], row.split("\t")[3]) for row in sys.stdin.read().splitlines()}
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and (m["target"]["name"], m["manifest_path"]) in wanted:
        print(m["target"]["name"] + "\t" + m["executable"])
' target/stress-build.json)

rm -rf "$OUT"
mkdir -p "$OUT/runs"
jobs_file="$OUT/jobs"
: >"$jobs_file"
for name in $BINARIES; do
    if [ -z "${EXE[$name]:-}" ]; then
        echo "stress: no test binary built for $name" >&2
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
