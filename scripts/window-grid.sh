#!/usr/bin/env bash
# The receive-window grid (issue 10, item 6): one publisher and one subscriber through a relay,
# S tracks each sending one F-byte frame per group in synchronized rounds (every track's frame
# due at the same instant: the burst is S x F), for every relay receive window W, with the
# per-stream window finite (W/8, moq-tokio's ratio) or equal to W. On loopback and through a
# 200 Mbit/s bottleneck (tc tbf, 250 ms of queue, no random loss) on the path from the clients
# to the relay, so the relay's receive window faces a bufferbloated link. Starling and
# moq-relay 0.17.10 take the same load in turn, cell by cell.
#
# PATHS may also name `twolinks`: the same namespaces with the 200 Mbit/s link shaped both
# ways, so a frame crosses two bottlenecked links (the publisher's uplink, then the
# subscriber's downlink) and a relay that forwards a frame's bytes as they arrive delivers it
# about one link's transfer time sooner than one that waits for its last byte.
#
#   scripts/window-grid.sh                        # the whole grid (about an hour)
#   STREAMS="16" FRAMES="256KiB" PATHS=loopback scripts/window-grid.sh
#
# Settings (environment): STREAMS ("1 16 256"), FRAMES ("16KiB 256KiB 4MiB"), WINDOWS in MiB
# ("8 32 128"), MODES ("finite equal"), PATHS ("loopback bottleneck"; the bottleneck needs root),
# RELAYS ("starling moq-relay"), LOOPBACK_RATE and BOTTLENECK_RATE (offered MiB/s, 64 and 19:
# 80 % of the link), MIN_BYTES (per cell, 64 MiB) and MIN_ROUNDS (2).
#
# Reported per cell and relay: delivered MiB/s (schedule start to the last frame's arrival),
# p50/p99 group latency (from the frame's due time to its arrival; a round's burst is part of
# it), frames lost, client errors, and for Starling the peak one session held in incomplete
# units (KiB), the streams evicted and the groups skipped as too far behind (sampled from
# /metrics every 200 ms). The run fails when Starling evicts a stream or its client sees an
# error (a group reset) in any cell; frames lost are reported beside the skips that explain them. Results: target/window-grid/<time>/
# (grid.csv, report.md, one JSON summary and log per run).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/relay-ready.sh
. scripts/lib/relay-ready.sh

STREAMS=${STREAMS:-"1 16 256"}
FRAMES=${FRAMES:-"16KiB 256KiB 4MiB"}
WINDOWS=${WINDOWS:-"8 32 128"}
MODES=${MODES:-"finite equal"}
PATHS=${PATHS:-"loopback bottleneck"}
RELAYS=${RELAYS:-"starling moq-relay"}
LOOPBACK_RATE=${LOOPBACK_RATE:-64}
BOTTLENECK_RATE=${BOTTLENECK_RATE:-19}
MIN_BYTES=${MIN_BYTES:-$((64 << 20))}
MIN_ROUNDS=${MIN_ROUNDS:-2}
PORT=${PORT:-15443}
METRICS_PORT=${METRICS_PORT:-15090}
OUT=${OUT:-target/window-grid/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

if [[ " $RELAYS " == *" moq-relay "* ]]; then
    scripts/install-peers.sh >/dev/null
fi
CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
MOQ_RELAY="${STARLING_MOQ_RELAY:-$CACHE/moq-relay-0.17.10/bin/moq-relay}"
cargo build --release --locked -p starling -p starling-loadgen
# The commit built, recorded now: the checkout may move while the grid runs.
BUILT=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo "+changes")
STARLING=$PWD/target/release/starling
LOAD=$PWD/target/release/starling-load

# The bottleneck: the clients in one namespace, the relay in another, joined by a veth pair
# whose client end sends through tbf at 200 Mbit/s with a 250 ms queue.
NS_CLIENT=sl-grid-c
NS_RELAY=sl-grid-r
# bottleneck_up [both]: with `both`, the relay's end sends through its own tbf too.
bottleneck_up() {
    bottleneck_down
    ip netns add "$NS_CLIENT"
    ip netns add "$NS_RELAY"
    ip link add sl-grid-c type veth peer name sl-grid-r
    ip link set sl-grid-c netns "$NS_CLIENT"
    ip link set sl-grid-r netns "$NS_RELAY"
    ip -n "$NS_CLIENT" addr add 10.231.0.1/24 dev sl-grid-c
    ip -n "$NS_RELAY" addr add 10.231.0.2/24 dev sl-grid-r
    for ns in "$NS_CLIENT" "$NS_RELAY"; do
        ip -n "$ns" link set lo up
    done
    ip -n "$NS_CLIENT" link set sl-grid-c up
    ip -n "$NS_RELAY" link set sl-grid-r up
    tc -n "$NS_CLIENT" qdisc add dev sl-grid-c root tbf rate 200mbit burst 128kb latency 250ms
    if [ "${1:-}" = both ]; then
        tc -n "$NS_RELAY" qdisc add dev sl-grid-r root tbf rate 200mbit burst 128kb latency 250ms
    fi
}
bottleneck_down() {
    ip netns del "$NS_CLIENT" 2>/dev/null || true
    ip netns del "$NS_RELAY" 2>/dev/null || true
}

RELAY_PID=
SAMPLER_PID=
stop_relay() {
    if [ -n "$SAMPLER_PID" ]; then
        kill "$SAMPLER_PID" 2>/dev/null || true
        wait "$SAMPLER_PID" 2>/dev/null || true
    fi
    if [ -n "$RELAY_PID" ]; then
        kill -TERM "$RELAY_PID" 2>/dev/null || true
        wait "$RELAY_PID" 2>/dev/null || true
    fi
    SAMPLER_PID= RELAY_PID=
}
cleanup() {
    stop_relay
    if [[ " $PATHS " == *" bottleneck "* || " $PATHS " == *" twolinks "* ]]; then bottleneck_down; fi
}
trap cleanup EXIT

# start_relay NAME WINDOW STREAM_WINDOW LOG, inside the relay's namespace if any.
start_relay() {
    local name=$1 window=$2 stream_window=$3 log=$4
    case $name in
        starling)
            ${IN_NS[@]+"${IN_NS[@]}"} "$STARLING" relay --bind "$HOST:$PORT" --tls-generate localhost \
                --internal-listen "127.0.0.1:$METRICS_PORT" --log warn \
                --receive-window "$window" --stream-receive-window "$stream_window" >"$log" 2>&1 &
            ;;
        moq-relay)
            ${IN_NS[@]+"${IN_NS[@]}"} "$MOQ_RELAY" --listen "$HOST:$PORT" --listen-tls-generate localhost \
                --web-http-listen "$HOST:$PORT" --auth-public '**' --log-level warn \
                --quic-receive-window "$window" --quic-stream-receive-window "$stream_window" \
                >"$log" 2>&1 &
            ;;
    esac
    RELAY_PID=$!
    wait_ready "$name" "$PORT" "$RELAY_PID" "$log" "$HOST"
}

# Sample Starling's /metrics every 200 ms: the highest per-session peak held, the evictions and
# the groups skipped as too far behind.
start_sampler() {
    local file=$1
    (
        peak=0
        while true; do
            metrics=$(${IN_NS[@]+"${IN_NS[@]}"} curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" || true)
            now=$(awk '/^starling_receive_budget_peak_bytes /{print $2}' <<<"$metrics")
            evicted=$(awk '/^starling_receive_budget_evictions_total /{print $2}' <<<"$metrics")
            skipped=$(awk '/^starling_slow_subscriber_skips_total /{print $2}' <<<"$metrics")
            if [ -n "$now" ] && awk -v a="$now" -v b="$peak" 'BEGIN{exit !(a>b)}'; then peak=$now; fi
            echo "${peak:-0} ${evicted:-0} ${skipped:-0}" >"$file.tmp" && mv "$file.tmp" "$file"
            sleep 0.2
        done
    ) &
    SAMPLER_PID=$!
}

bytes_of() { # 16KiB -> 16384
    local v=$1
    case $v in
        *KiB) echo $((${v%KiB} << 10)) ;;
        *MiB) echo $((${v%MiB} << 20)) ;;
        *) echo "$v" ;;
    esac
}

CSV=$OUT/grid.csv
echo "path,relay,streams,frame,window_mib,stream_window,offered_mib_s,mib_s,p50_ms,p99_ms,peak_held_kib,evicted,lost,expected,errors,skipped" >"$CSV"
failures=0

for path in $PATHS; do
    case $path in
        loopback) IN_NS=(); CLIENT_NS=(); HOST=127.0.0.1; RATE=$LOOPBACK_RATE ;;
        bottleneck | twolinks)
            if [ "$(id -u)" -ne 0 ]; then
                echo "window-grid: the $path path needs root (network namespaces); skipped" >&2
                continue
            fi
            if [ "$path" = twolinks ]; then bottleneck_up both; else bottleneck_up; fi
            IN_NS=(ip netns exec "$NS_RELAY"); CLIENT_NS=(ip netns exec "$NS_CLIENT")
            HOST=10.231.0.2; RATE=$BOTTLENECK_RATE ;;
    esac
    for streams in $STREAMS; do
        for frame in $FRAMES; do
            frame_bytes=$(bytes_of "$frame")
            round=$((streams * frame_bytes))
            rounds=$(((MIN_BYTES + round - 1) / round))
            [ "$rounds" -lt "$MIN_ROUNDS" ] && rounds=$MIN_ROUNDS
            fps=$(awk -v r="$RATE" -v b="$round" 'BEGIN{printf "%.6f", r * 1048576 / b}')
            duration=$(awk -v n="$rounds" -v f="$fps" 'BEGIN{printf "%.6f", n / f}')
            for window in $WINDOWS; do
                for mode in $MODES; do
                    window_bytes=$((window << 20))
                    case $mode in
                        finite) stream_window=$((window_bytes / 8)) ;;
                        equal) stream_window=$window_bytes ;;
                    esac
                    for relay in $RELAYS; do
                        cell="$path-$relay-s$streams-f$frame-w$window-$mode"
                        start_relay "$relay" "$window_bytes" "$stream_window" "$OUT/$cell.relay.log"
                        if [ "$relay" = starling ]; then start_sampler "$OUT/$cell.budget"; fi
                        # The drain covers a whole round through the bottleneck, twice over.
                        drain_ms=$(awk -v b="$round" -v r="$RATE" 'BEGIN{printf "%d", 20000 + 2000 * b / (r * 1048576)}')
                        ${CLIENT_NS[@]+"${CLIENT_NS[@]}"} "$LOAD" fanout --url "moqt://$HOST:$PORT/" \
                            --tls-disable-verify --no-progress --subscribers 1 --tracks "$streams" \
                            --frame-size "$frame_bytes" --group-frames 1 --fps "$fps" \
                            --duration-secs "$duration" --drain-ms "$drain_ms" \
                            --relay-pid "$RELAY_PID" --json "$OUT/$cell.json" >"$OUT/$cell.txt" 2>&1 || true
                        peak=0 evicted=0 skipped=0
                        if [ "$relay" = starling ] && [ -f "$OUT/$cell.budget" ]; then
                            read -r peak evicted skipped <"$OUT/$cell.budget"
                        fi
                        stop_relay
                        row=$(python3 - "$OUT/$cell.json" "$peak" "$evicted" <<'PY'
import json, sys
path, peak, evicted = sys.argv[1], float(sys.argv[2]), sys.argv[3]
try:
    s = json.load(open(path))
except (OSError, ValueError):
    print("nan,nan,nan,nan,nan,-1,-1,-1"); sys.exit()
d = s["latency"].get("delivery", {})
f = lambda v: "nan" if v is None else f"{v:.1f}"
errors = sum(s["errors"].values())
print(",".join([f(s.get("throughput_mib_s")), f(d.get("p50_ms")), f(d.get("p99_ms")),
                f"{peak / 1024:.0f}", evicted, str(s["frames"]["lost"]),
                str(s["frames"]["expected"]), str(errors)]))
PY
)
                        echo "$path,$relay,$streams,$frame,$window,$mode,$RATE,$row,$skipped" >>"$CSV"
                        echo "$cell: $row, skipped $skipped"
                        if [ "$relay" = starling ]; then
                            IFS=, read -r _ _ _ _ ev lost expected errors <<<"$row"
                            if [ "$ev" != 0 ] || [ "$errors" != 0 ] || [ "$expected" -le 0 ]; then
                                echo "window-grid: FAILED $cell (evicted $ev, errors $errors; lost $lost)" >&2
                                failures=$((failures + 1))
                            fi
                        fi
                    done
                done
            done
        done
    done
    if [ "$path" != loopback ]; then bottleneck_down; fi
done

{
    echo "### Receive-window grid, $(date -u +%Y-%m-%d)"
    echo
    echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),"
    echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)."
    echo "Starling $BUILT (release), moq-relay 0.17.10 (release)."
    echo "Offered: $LOOPBACK_RATE MiB/s on loopback, $BOTTLENECK_RATE MiB/s through the bottleneck;"
    echo "at least $MIN_ROUNDS rounds and $((MIN_BYTES >> 20)) MiB per cell."
    echo
    python3 - "$CSV" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cells = {}
for r in rows:
    key = (r["path"], int(r["streams"]), r["frame"], int(r["window_mib"]), r["stream_window"])
    cells.setdefault(key, {})[r["relay"]] = r
relays = sorted({r["relay"] for r in rows}, key=lambda n: n != "starling")
head = "| path | streams | frame | window | stream window |"
for name in relays:
    head += f" {name} MiB/s | p50 / p99 ms |"
    if name == "starling":
        head += " peak held KiB | evicted | skipped |"
    head += " lost |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
for key in sorted(cells, key=lambda k: (k[0], k[1], {"16KiB": 0, "256KiB": 1, "4MiB": 2}.get(k[2], 9), k[3], k[4])):
    path, streams, frame, window, mode = key
    line = f"| {path} | {streams} | {frame} | {window} MiB | {'W/8' if mode == 'finite' else 'W'} |"
    for name in relays:
        r = cells[key].get(name)
        if r is None:
            line += " - | - |" + (" - | - | - |" if name == "starling" else "") + " - |"
            continue
        line += f" {r['mib_s']} | {r['p50_ms']} / {r['p99_ms']} |"
        if name == "starling":
            line += f" {r['peak_held_kib']} | {r['evicted']} | {r.get('skipped', '-')} |"
        line += f" {r['lost']} |"
    print(line)
PY
} >"$OUT/report.md"
cat "$OUT/report.md"
echo "written: $OUT/report.md and $CSV"
if [ "$failures" -gt 0 ]; then
    echo "window-grid: $failures Starling cells evicted a stream or saw a group reset" >&2
    exit 1
fi
