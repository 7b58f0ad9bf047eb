#!/usr/bin/env bash
# Before and after, in one sitting: two commits, each built in its own worktree and target
# directory, their session-bench binaries run in alternating rounds (the order flips each
# round), pinned to one core, and each shape's per-round ratio after/before reported with its
# median, a bootstrap 95 % interval and in how many rounds "after" was faster.
#
#   scripts/bench-pair.sh BEFORE AFTER criterion   # criterion's session bench
#   scripts/bench-pair.sh BEFORE AFTER profile     # the profile loop (CPU ns per item)
#
#   ROUNDS=4 FILTER='^dash_production(_ietf22)?/' scripts/bench-pair.sh 1633a6ad HEAD criterion
#   ROUNDS=30 PROFILE="dash 35 5 24 20" VERSION=moq-transport-22 \
#       scripts/bench-pair.sh 1633a6ad HEAD profile
#
# On a shared 2-core machine wall times move by a third between rounds of the same binary:
# read the ratio's interval, and count instructions (valgrind, docs/benchmarks.md) for small
# differences. Worktrees and builds are kept under $PAIR_DIR (default ~/.cache/starling/
# bench-pair/<commit>), so a second run with the same commits builds nothing.
set -euo pipefail

BEFORE=${1:?usage: bench-pair.sh BEFORE AFTER criterion|profile}
AFTER=${2:?usage: bench-pair.sh BEFORE AFTER criterion|profile}
MODE=${3:-criterion}
ROUNDS=${ROUNDS:-4}
FILTER=${FILTER:-'^(delivery|delivery_ietf22)/viewers/(10|1000)$|^dash_production(_ietf22)?/'}
PROFILE=${PROFILE:-dash 35 5 24 20}
VERSION=${VERSION:-moq-transport-22}
PIN=${PIN:-taskset -c 1}
PAIR_DIR=${PAIR_DIR:-$HOME/.cache/starling/bench-pair}
OUT=${OUT:-target/bench-pair/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" "$PAIR_DIR"
ROOT=$(git rev-parse --show-toplevel)

# Build one commit's binary for MODE in its own worktree; print the binary's path.
build() {
    local sha tree
    sha=$(git -C "$ROOT" rev-parse --short=12 "$1^{commit}")
    tree="$PAIR_DIR/$sha"
    [ -d "$tree" ] || git -C "$ROOT" worktree add --detach "$tree" "$sha" >&2
    case $MODE in
        criterion)
            (cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo bench --locked \
                -p starling-bench --bench session --no-run --message-format=json 2>/dev/null) |
                python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="session": print(m["executable"])' |
                tail -1
            ;;
        profile)
            (cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo build --release --locked \
                -p starling-bench --example profile >&2)
            echo "$tree/target/release/examples/profile"
            ;;
        *) echo "unknown mode $MODE (criterion or profile)" >&2; exit 1 ;;
    esac
}

before_bin=$(build "$BEFORE")
after_bin=$(build "$AFTER")
echo "before $BEFORE: $before_bin" | tee "$OUT/binaries"
echo "after $AFTER: $after_bin" | tee -a "$OUT/binaries"

# One run of one binary; prints "<shape> <value>" lines.
run() {
    case $MODE in
        criterion)
            # shellcheck disable=SC2086
            $PIN "$1" --bench --noplot "$FILTER" 2>&1 | awk '
                /^[a-z_0-9]+\/[a-z]+\/[0-9]+/ { shape = $1 }
                /time:/ && !/%\]/ {
                    if ($1 !~ /time:/) shape = $1
                    for (i = 1; i <= NF; i++) if ($i ~ /^\[/) { print shape, $(i + 2); break }
                }'
            ;;
        profile)
            # shellcheck disable=SC2086
            STARLING_BENCH_VERSION=$VERSION $PIN "$1" $PROFILE |
                sed -nE 's/^(ticks|frames) .*cpu ([0-9]+) ns per item/\1 \2/p'
            ;;
    esac
}

for round in $(seq "$ROUNDS"); do
    if ((round % 2)); then order="before after"; else order="after before"; fi
    for side in $order; do
        bin=$before_bin
        [ "$side" = after ] && bin=$after_bin
        run "$bin" | sed "s/^/$round $side /" | tee -a "$OUT/rounds"
    done
done

python3 - "$OUT/rounds" <<'EOF' | tee "$OUT/summary"
import random, statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    rnd, side, shape, value = line.split()
    runs.setdefault(shape, {}).setdefault(side, {})[int(rnd)] = float(value)
random.seed(27)
for shape, sides in runs.items():
    before, after = sides.get("before", {}), sides.get("after", {})
    ratios = [after[r] / before[r] for r in before if r in after]
    if not ratios:
        continue
    boot = sorted(st.median(random.choices(ratios, k=len(ratios))) for _ in range(2000))
    print(f"{shape}: before {st.median(before.values()):.4g} after {st.median(after.values()):.4g}"
          f" ratio {st.median(ratios):.3f} (95 % {boot[50]:.3f}-{boot[1949]:.3f}),"
          f" after faster in {sum(r < 1 for r in ratios)} of {len(ratios)}")
EOF
echo "rounds and summary: $OUT"
