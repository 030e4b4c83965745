#!/usr/bin/env bash
# Installs every Debian 12 package that cinfer's build, tests and benchmarks need.
# Idempotent and non-interactive; run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libzmq3-dev libltdl-dev libconfig-dev check libsubunit-dev
  libpcre2-dev libutf8proc-dev libjansson-dev libmicrohttpd-dev
  clang libclang-rt-14-dev
  python3 python3-numpy python3-sentencepiece
  bible-kjv bible-kjv-text libopenblas0-pthread python3-regex
  nodejs npm curl openssl
  openssh-client openssh-server openmpi-bin libopenmpi-dev iproute2
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node may come from outside Debian on some images; keep it if it is recent enough.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]:-}"
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup-debian: all packages present"
