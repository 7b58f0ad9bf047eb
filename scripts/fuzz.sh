#!/usr/bin/env bash
# Fuzz every target in fuzz/ with cargo-fuzz (libFuzzer, nightly toolchain), one after
# another, for SECONDS each (default 60), or for RUNS executions each when RUNS is set. The
# targets are found with `cargo fuzz list` (every [[bin]] of fuzz/Cargo.toml), so a new one
# joins by itself; TARGETS picks some.
# The seeds (golden encodings, crates/fuzzing/src/seeds.rs) are written into
# fuzz/corpus/<target>/ first; what a run finds is merged back with libFuzzer's
# -set_cover_merge=1 (the smallest set covering every feature), so the committed corpus stays
# small. A crash stops the script: its input is kept under
# fuzz/artifacts/<target>/; copy it to fuzz/corpus/<target>/regression-<what> once fixed,
# and the stable suite (crates/fuzzing/tests/corpus.rs) replays it from then on.
#
#   scripts/fuzz.sh [SECONDS]              # every target, SECONDS each
#   RUNS=10000000 scripts/fuzz.sh          # every target, 10 M executions each
#   TARGETS="lite_message qmux_frames" scripts/fuzz.sh 300
#   scripts/fuzz.sh --build                # only build every target, as a run builds it
#
# The nightly toolchain is installed when missing, and cargo-fuzz (a pinned version) into
# $HOME/.cache/starling/cargo-fuzz-<version>/, so a fresh clone reuses it. `--build` is what
# scripts/test.sh runs, so no target can stop compiling unnoticed; it shares its build
# directories with the runs.
#
# Each target's executions and findings are appended to target/fuzz/summary.txt.
#
# The decoder targets run under AddressSanitizer (cargo-fuzz's default). The session targets
# (`session` on lite-06, `ietf_session` on the IETF drafts) run without a sanitizer and
# without leak detection: they are safe Rust whose findings are panics, hangs and broken
# invariants, and their relay persists across inputs by design, which made LeakSanitizer scan
# the heap after every input (70 % of the time); without them they run about 12 times as
# fast. They build in a target directory of their own, so alternating targets rebuild
# nothing. Their inputs are capped at 384 bytes: an execution costs about its number of steps
# (at 2 KiB inputs it ran 200 a second), and the hostile session's budget is 256 bytes, so
# short inputs reach every bound.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_ONLY=0
if [ "${1:-}" = "--build" ]; then
  BUILD_ONLY=1
  shift
fi
SECONDS_EACH="${1:-60}"
OUT=target/fuzz
mkdir -p "$OUT"

if ! rustup toolchain list | grep -q '^nightly-'; then
  rustup toolchain install nightly --profile minimal
fi
CARGO_FUZZ_VERSION=0.13.2
CARGO_FUZZ_ROOT="${STARLING_CACHE:-$HOME/.cache/starling}/cargo-fuzz-$CARGO_FUZZ_VERSION"
if [ ! -x "$CARGO_FUZZ_ROOT/bin/cargo-fuzz" ]; then
  cargo install --locked "cargo-fuzz@$CARGO_FUZZ_VERSION" --root "$CARGO_FUZZ_ROOT"
fi
export PATH="$CARGO_FUZZ_ROOT/bin:$PATH"

if [ -z "${TARGETS:-}" ]; then
  TARGETS=$(cd fuzz && cargo +nightly fuzz list | tr '\n' ' ')
fi
TARGETS=${TARGETS% }

# How a target is built and run: the session targets without a sanitizer, in a target
# directory of their own, with short inputs and no leak detection (see above).
flags() {
  case $1 in
    session|ietf_session) sanitizer=(-s none --target-dir ../target/fuzz-unsanitized); extra=(-detect_leaks=0); max_len=384 ;;
    *) sanitizer=(); extra=(); max_len=4096 ;;
  esac
}

if [ "$BUILD_ONLY" = 1 ]; then
  cd fuzz
  for target in $TARGETS; do
    flags "$target"
    echo "fuzz: building $target"
    cargo +nightly fuzz build -O "${sanitizer[@]}" "$target"
  done
  echo "fuzz: built $(echo "$TARGETS" | wc -w) targets: $TARGETS"
  exit 0
fi

cargo run -q -p starling-fuzzing --bin fuzz-seeds -- fuzz/corpus

cd fuzz
for target in $TARGETS; do
  work="../$OUT/$target"
  rm -rf "$work" && mkdir -p "$work"
  if [ -n "${RUNS:-}" ]; then
    limit=(-runs="$RUNS")
  else
    limit=(-max_total_time="$SECONDS_EACH")
  fi
  flags "$target"
  echo "=== $target (${RUNS:-${SECONDS_EACH}s})"
  started=$(date +%s)
  # New inputs go to a scratch directory; the committed corpus is read-only input here.
  cargo +nightly fuzz run -O "${sanitizer[@]}" "$target" "$work" "corpus/$target" -- \
    "${limit[@]}" "${extra[@]}" -max_len="$max_len" -print_final_stats=1 2>&1 | tee "$work.log" | grep -E "^(#[0-9]+.*DONE|==|stat::number_of_executed_units)" || true
  if grep -q "SUMMARY: \|panicked at" "$work.log"; then
    echo "=== $target: CRASH, see fuzz/artifacts/$target and $work.log"
    exit 1
  fi
  execs=$(grep -oE "stat::number_of_executed_units: [0-9]+" "$work.log" | grep -oE "[0-9]+$" || echo 0)
  # Merge what was found back into the committed corpus: the smallest set of inputs that
  # covers every feature of the old corpus and the new finds (libFuzzer's set-cover merge),
  # with every seed and regression input kept whatever it adds.
  merged="$work.merged"
  rm -rf "$merged" && mkdir -p "$merged"
  if cargo +nightly fuzz run -O "${sanitizer[@]}" "$target" "$merged" "corpus/$target" "$work" -- \
    -set_cover_merge=1 "${extra[@]}" >"$work.merge.log" 2>&1; then
    find "corpus/$target" -maxdepth 1 \( -name 'seed-*' -o -name 'regression-*' \) -exec cp {} "$merged/" \;
    rm -rf "corpus/$target" && mv "$merged" "corpus/$target"
  else
    echo "=== $target: merge failed, corpus left as it was (see $work.merge.log)"
  fi
  echo "$(date -u +%FT%TZ) $target executions=$execs seconds=$(( $(date +%s) - started )) corpus=$(ls "corpus/$target" | wc -l) crashes=0" \
    | tee -a "../$OUT/summary.txt"
done
