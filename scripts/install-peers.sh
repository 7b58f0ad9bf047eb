#!/usr/bin/env bash
# Installs the reference peers the interop tests run against (moq-relay 0.17.10, moq-cli
# 0.14.10) from crates.io into $HOME/.cache/starling/<crate>-<version>/, once per version:
# a fresh clone (CI) reuses the cache, a fresh machine rebuilds it.
#
# `cargo install --locked` is tried first. When the registry no longer serves a version the
# published lockfile pins (webpki-roots 1.0.11 is the one known case), the crate's own source
# is taken from the registry, that one dependency is moved to the nearest served version, and
# the install runs `--locked` against the adjusted lockfile.
set -euo pipefail

CACHE="${STARLING_CACHE:-$HOME/.cache/starling}"
mkdir -p "$CACHE"
export CARGO_TARGET_DIR="$CACHE/peer-target"

install_peer() {
    local crate="$1" version="$2" bin="$3"
    local root="$CACHE/$crate-$version"
    if [ -x "$root/bin/$bin" ]; then
        echo "install-peers: $crate $version cached at $root/bin/$bin"
        return
    fi
    echo "install-peers: building $crate $version (first time on this machine; takes a while)"
    if cargo install --quiet --locked "$crate@$version" --root "$root" 2>"$CACHE/$crate-install.err"; then
        return
    fi
    if ! grep -q "failed to select a version" "$CACHE/$crate-install.err"; then
        cat "$CACHE/$crate-install.err" >&2
        return 1
    fi
    local registry_src
    registry_src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$crate-$version" | head -n 1)
    local src="$CACHE/src/$crate-$version"
    rm -rf "$src"
    mkdir -p "$CACHE/src"
    cp -r "$registry_src" "$src"
    (cd "$src" && cargo update --quiet -p webpki-roots --precise 1.0.10)
    cargo install --quiet --locked --path "$src" --root "$root"
}

install_peer moq-relay 0.17.10 moq-relay
install_peer moq-cli 0.14.10 moq

echo "STARLING_MOQ_RELAY=$CACHE/moq-relay-0.17.10/bin/moq-relay"
echo "STARLING_MOQ_CLI=$CACHE/moq-cli-0.14.10/bin/moq"
