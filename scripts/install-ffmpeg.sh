#!/usr/bin/env bash
# Installs ffmpeg (with ffprobe) from Debian's packages, for the media tests
# (crates/interop/tests/media.rs) and the quick start's test pattern. Needs root (or sudo).
set -euo pipefail
command -v ffmpeg >/dev/null && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -qq ffmpeg >/dev/null 2>&1 || {
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq ffmpeg >/dev/null
}
ffmpeg -hide_banner -version | head -n 1
