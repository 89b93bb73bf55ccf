#!/bin/bash
# demo.sh - build weir and show its main job: a verified, compressed loopback
# transfer of a few GiB of generated data, with the live status line and the
# summaries of both ends.
#
#   scripts/demo.sh [GiB]      (default 4)
set -eu
cd "$(dirname "$0")/.."
gib=${1:-4}
bash scripts/deps.sh
if [ ! -f build/build.ninja ]; then
    meson setup build -Dbuildtype=release >/dev/null
fi
ninja -C build >/dev/null
W=build/weir
tmp=$(mktemp -d)
rpid=
trap 'if [ -n "$rpid" ]; then kill "$rpid" 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT

# 64 MiB of mixed data (text, binaries, zeros, random), sent over and over
{ cat /usr/share/common-licenses/* 2>/dev/null; find /usr/bin -type f -size -8M \
      -exec cat {} + 2>/dev/null; } | head -c 40M >"$tmp/mix"
head -c 12M /dev/zero >>"$tmp/mix"
head -c 12M /dev/urandom >>"$tmp/mix"
reps=$((gib * 16))

echo "receiver:  weir -I 0 -o /dev/null"
$W -I 0 -o /dev/null 2>"$tmp/receiver.log" &
rpid=$!
for _ in $(seq 100); do grep -q "listening on" "$tmp/receiver.log" && break; sleep 0.05; done
port=$(grep -o 'listening on .*' "$tmp/receiver.log" | grep -o '[0-9]*$')
echo "sender:    (${gib} GiB of mixed data) | weir -z --size ${gib}G -O 127.0.0.1:$port"
echo
status=0
for _ in $(seq "$reps"); do cat "$tmp/mix"; done \
    | $W -z --size "${gib}G" -O "127.0.0.1:$port" || status=$?
rstatus=0
wait "$rpid" || rstatus=$?
echo
echo "the receiver said:"
sed 's/^/  /' "$tmp/receiver.log"
echo
echo "sender exit status $status, receiver exit status $rstatus"
rpid=
[ "$status" -eq 0 ] && [ "$rstatus" -eq 0 ]
