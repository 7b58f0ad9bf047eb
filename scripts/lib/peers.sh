# Sourced by the side-by-side benchmark scripts: moq-relay 0.17.10 through
# scripts/install-peers.sh (MOQ_RELAY), Starling and the load generator built in release
# (STARLING, LOAD).
scripts/install-peers.sh
CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
MOQ_RELAY="${STARLING_MOQ_RELAY:-$CACHE/moq-relay-0.17.10/bin/moq-relay}"
cargo build --release --locked -p starling -p starling-loadgen
STARLING=target/release/starling
LOAD=target/release/starling-load
