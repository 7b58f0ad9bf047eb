#!/usr/bin/env bash
# The session bench's shapes through the profiling loop (`crates/bench/examples/profile.rs`):
# the dash at the production shape and across track and relay counts, and delivery to 1 to
# 1000 viewers, on each protocol version given. Prints one markdown table (ns per item).
#
#   scripts/session-shapes.sh                          # lite-06 and moq-transport-22
#   VERSIONS="lite-06 lite-07" scripts/session-shapes.sh
#   BUILDS="before=../before/target/release/examples/profile after=target/release/examples/profile" \
#       scripts/session-shapes.sh                      # two builds, shape by shape
#
# One process per shape and build, the builds one right after the other for each shape (so
# a shared machine's drift hits them alike): CPU time per item as the loop measures it.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSIONS=${VERSIONS:-"lite-06 moq-transport-22"}
if [ -z "${BUILDS:-}" ]; then
    cargo build --release --locked -p starling-bench --example profile >&2
    BUILDS="this=target/release/examples/profile"
fi

# name | profile arguments: relays (relay 0 plus the nodes), projects, tracks, ticks; or
# viewers, frames (ticks and frames scaled to about two seconds each)
SHAPES=(
    "dash production, 35 relays x 5 projects x 24 tracks (4 080)|dash 35 5 24 60"
    "dash 4 nodes x 1 project x 24 tracks (96)|dash 5 1 24 2000"
    "dash 4 nodes x 4 projects x 24 tracks (384)|dash 5 4 24 500"
    "dash 4 nodes x 16 projects x 24 tracks (1 536)|dash 5 16 24 120"
    "dash 4 nodes x 64 projects x 24 tracks (6 144)|dash 5 64 24 30"
    "dash 1 node x 32 projects x 24 tracks (768)|dash 2 32 24 250"
    "dash 8 nodes x 4 projects x 24 tracks (768)|dash 9 4 24 250"
    "dash 32 nodes x 1 project x 24 tracks (768)|dash 33 1 24 250"
    "delivery, 1 viewer|delivery 1 20000"
    "delivery, 10 viewers|delivery 10 5000"
    "delivery, 100 viewers|delivery 100 1000"
    "delivery, 1000 viewers|delivery 1000 300"
)

header="| shape |"
rule="|---|"
for version in $VERSIONS; do
    for build in $BUILDS; do
        header+=" $version, ${build%%=*} |"
        rule+="---:|"
    done
done
echo "$header"
echo "$rule"
for shape in "${SHAPES[@]}"; do
    name=${shape%%|*}
    args=${shape#*|}
    row="| $name |"
    for version in $VERSIONS; do
        for build in $BUILDS; do
            # shellcheck disable=SC2086
            ns=$(STARLING_BENCH_VERSION=$version "${build#*=}" $args |
                sed -n 's/^\(ticks\|frames\).*cpu \([0-9]*\) ns per item/\2/p')
            row+=" ${ns:-?} |"
        done
    done
    echo "$row"
done
