#!/bin/bash
# deps.sh - install what building and testing weir needs, when it is missing.
# Needs root (or sudo) only if something is missing.  Debian 12 package names.
set -eu
pkgs=(meson ninja-build pkg-config gcc clang liblz4-dev libzstd-dev libxxhash-dev libssl-dev
      lz4 zstd xxhash
      netcat-openbsd mbuffer pv socat iperf3 hyperfine valgrind libclang-rt-14-dev time
      procps iproute2 bc openssh-server openssh-client python3 python3-lz4
      python3-zstandard libarchive-tools systemd
      debhelper dpkg-dev fakeroot lintian bash-completion zsh)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps.sh: installing ${missing[*]}" >&2
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
