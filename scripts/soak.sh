#!/usr/bin/env bash
# Soak: churn against a Starling relay and a moq-relay 0.17.10 side by side for DURATION
# seconds (default 3600), sampling each relay's RSS and open descriptors every 10 s.
#
# The churn against each relay is the same, run by starling-load against it:
# - bursts one after another, each a new publisher (broadcast soak/<n>, 2 tracks at 30 fps)
#   with 60 clients (QUIC, WebSocket and HTTP fetch agents alike) joining, staying 20 s
#   and leaving;
# - track churn beside them (issue 25): `starling-load churn`, short-lived broadcasts of 10
#   tracks carrying 10 groups each, publishers and subscribers coming and going, 2 at once,
#   for the whole run (its summary in <relay>-tracks.log);
# - a few hostile clients per minute: HTTP connections that send half a request head and
#   wait, and QUIC-port connections that never finish a handshake.
#
# Starling passes when its RSS over the second half of the run grows by less than 2 %: the
# median of the samples in the run's last window against the median of the window around its
# midpoint, a window being a tenth of the run between one and five minutes. (With one-minute
# windows an hour failed at 2.78 % while flat: RSS swings by about 1 MiB with the bursts, more
# than 2 % of Starling's 28 MiB, so a one-minute median lands on a swing's phase.)
# moq-relay's figures are reported beside it. Results: target/soak/<time>/ with samples.csv
# (seconds, relay, rss_kib, fds), rss.svg (both RSS curves) and summary.txt.
#
#   scripts/soak.sh            # one hour
#   scripts/soak.sh 300        # five minutes
#   RELAYS=starling scripts/soak.sh 600
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/relay-ready.sh

DURATION="${1:-3600}"
RELAYS="${RELAYS:-starling moq-relay}"
PORT_STARLING="${PORT_STARLING:-16443}"
PORT_MOQ="${PORT_MOQ:-16543}"
OUT="${OUT:-target/soak/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"

if [[ " $RELAYS " == *" moq-relay "* ]]; then
  scripts/install-peers.sh >/dev/null
fi
CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
MOQ_RELAY="${STARLING_MOQ_RELAY:-$CACHE/moq-relay-0.17.10/bin/moq-relay}"
cargo build --release --locked -q -p starling -p starling-loadgen
BUILT=$(git rev-parse --short HEAD)
STARLING=target/release/starling
LOAD=target/release/starling-load

declare -A PID PORT
CHILDREN=()
TRACKS=()
cleanup() {
  for child in "${CHILDREN[@]}"; do kill "$child" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

for relay in $RELAYS; do
  case $relay in
    starling)
      PORT[$relay]=$PORT_STARLING
      "$STARLING" relay --bind "127.0.0.1:$PORT_STARLING" --tls-generate localhost \
        --internal-listen off --log warn >"$OUT/starling.log" 2>&1 &
      ;;
    moq-relay)
      PORT[$relay]=$PORT_MOQ
      "$MOQ_RELAY" --listen "127.0.0.1:$PORT_MOQ" --listen-tls-generate localhost \
        --web-http-listen "127.0.0.1:$PORT_MOQ" --auth-public '**' \
        --log-level warn >"$OUT/moq-relay.log" 2>&1 &
      ;;
    *) echo "unknown relay $relay" >&2; exit 2 ;;
  esac
  PID[$relay]=$!
  CHILDREN+=("$!")
  wait_ready "$relay" "${PORT[$relay]}" "${PID[$relay]}" "$OUT/$relay.log"
done

# Churn for one relay until the deadline: bursts back to back, each a fresh broadcast.
churn() {
  local relay=$1 port=$2 deadline=$3 n=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    "$LOAD" burst --url "moqt://127.0.0.1:$port/" --http-url "http://127.0.0.1:$port" \
      --ws-url "ws://127.0.0.1:$port/" --tls-disable-verify --no-progress \
      --clients 60 --concurrency 16 --hold-secs 20 --tracks 2 --fps 30 --frame-size 600 \
      --broadcast "soak/$n" --timeout-secs 15 >>"$OUT/$relay-churn.log" 2>&1 || true
    n=$((n + 1))
  done
}

# Track churn for one relay, for the whole run.
track_churn() {
  local relay=$1 port=$2
  "$LOAD" churn --url "moqt://127.0.0.1:$port/" --tls-disable-verify --no-progress \
    --concurrency 2 --duration-secs "$DURATION" >"$OUT/$relay-tracks.log" 2>&1 || true
}

# Hostile clients for one relay until the deadline: every 20 s, five half-sent HTTP request
# heads held open for 15 s, and five UDP datagrams of garbage at the QUIC port.
hostile() {
  local port=$1 deadline=$2
  while [ "$(date +%s)" -lt "$deadline" ]; do
    for _ in 1 2 3 4 5; do
      (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ' >&3 \
        && sleep 15; exec 3>&-) 2>/dev/null &
      head -c 1200 /dev/urandom >"/dev/udp/127.0.0.1/$port" 2>/dev/null || true
    done
    sleep 20
  done
}

started=$(date +%s)
deadline=$((started + DURATION))
for relay in $RELAYS; do
  churn "$relay" "${PORT[$relay]}" "$deadline" &
  CHILDREN+=("$!")
  track_churn "$relay" "${PORT[$relay]}" &
  CHILDREN+=("$!")
  TRACKS+=("$!")
  hostile "${PORT[$relay]}" "$deadline" &
  CHILDREN+=("$!")
done

echo "seconds,relay,rss_kib,fds" >"$OUT/samples.csv"
while [ "$(date +%s)" -lt "$deadline" ]; do
  now=$(( $(date +%s) - started ))
  for relay in $RELAYS; do
    pid=${PID[$relay]}
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$relay died after ${now}s; see $OUT/$relay.log" >&2
      exit 1
    fi
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    fds=$(ls "/proc/$pid/fd" | wc -l)
    echo "$now,$relay,$rss,$fds" >>"$OUT/samples.csv"
  done
  printf '\r%5ds / %ss' "$now" "$DURATION"
  sleep 10
done
echo
# The track churn reports when its own clock runs out, just after the samples end.
for pid in "${TRACKS[@]}"; do wait "$pid" 2>/dev/null || true; done

# Summary: per relay, the first-minute, midpoint and last-window medians, the second-half growth.
half=$((DURATION / 2))
window=$((DURATION / 10))
window=$((window < 60 ? 60 : window > 300 ? 300 : window))
{
  echo "Soak of ${DURATION}s, $(date -u +%F), Starling $BUILT, samples every 10 s, windows of ${window} s."
  echo "relay        rss_start_mib  rss_mid_mib  rss_end_mib  growth_second_half  fds_mid  fds_end"
  for relay in $RELAYS; do
    awk -F, -v r="$relay" -v half="$half" -v end="$DURATION" -v w="$window" '
      function median(list, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (list[j] < list[i]) { t = list[i]; list[i] = list[j]; list[j] = t }
        return n ? list[int((n + 1) / 2)] : 0
      }
      $2 == r {
        if ($1 < 60) s[++ns] = $3
        if ($1 >= half - w / 2 && $1 < half + w / 2) { m[++nm] = $3; fm = $4 }
        if ($1 >= end - w - 10) { e[++ne] = $3; fe = $4 }
      }
      END {
        start = median(s, ns); mid = median(m, nm); last = median(e, ne)
        growth = mid ? (last - mid) / mid * 100 : 0
        printf "%-12s %13.1f %12.1f %12.1f %18.2f%% %8d %8d\n", r, start / 1024, mid / 1024, last / 1024, growth, fm, fe
      }' "$OUT/samples.csv"
  done
  for relay in $RELAYS; do
    echo "$relay track churn: $(grep -h 'churn:' "$OUT/$relay-tracks.log" | tail -1)"
  done
} | tee "$OUT/summary.txt"

# The plot: RSS in MiB over time, one polyline per relay.
awk -F, -v dur="$DURATION" '
  NR == 1 { next }
  { t[NR] = $1; r[NR] = $2; v[NR] = $3 / 1024; if (v[NR] > max) max = v[NR]; n = NR }
  END {
    W = 800; H = 400; L = 60; B = 40; max = max * 1.1 + 1
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W + L + 20, H + B + 30
    printf "<text x=\"%d\" y=\"16\">relay RSS (MiB) over %d s of churn</text>\n", L, dur
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, 20 + H, L + W, 20 + H
    printf "<line x1=\"%d\" y1=\"20\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, L, 20 + H
    for (k = 0; k <= 4; k++) {
      y = 20 + H - H * k / 4
      printf "<text x=\"4\" y=\"%d\">%.0f</text>\n", y + 4, max * k / 4
      printf "<text x=\"%d\" y=\"%d\">%ds</text>\n", L + W * k / 4 - 10, 20 + H + 16, dur * k / 4
    }
    split("starling moq-relay", names, " "); color["starling"] = "#1f77b4"; color["moq-relay"] = "#d62728"
    for (q = 1; q <= 2; q++) {
      name = names[q]; points = ""
      for (i = 2; i <= n; i++) if (r[i] == name) points = points sprintf("%.1f,%.1f ", L + W * t[i] / dur, 20 + H - H * v[i] / max)
      if (points != "") {
        printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n", color[name], points
        printf "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", L + W - 90, 36 + 16 * q, color[name], name
      }
    }
    print "</svg>"
  }' "$OUT/samples.csv" >"$OUT/rss.svg"

echo "samples: $OUT/samples.csv, plot: $OUT/rss.svg"
if [[ " $RELAYS " == *" starling "* ]]; then
  growth=$(awk '$1 == "starling" { sub("%", "", $5); print $5 }' "$OUT/summary.txt")
  if awk -v g="$growth" 'BEGIN { exit !(g < 2) }'; then
    echo "PASS: Starling's RSS grew ${growth}% over the second half (bound 2%)"
  else
    echo "FAIL: Starling's RSS grew ${growth}% over the second half (bound 2%)"
    exit 1
  fi
fi
