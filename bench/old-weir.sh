#!/bin/bash
# bench/old-weir.sh - holes between this weir and one that predates them
# (stream version 1), both ways, built from git at OLD (default: the commit
# before hole records were added).
#
#   bench/old-weir.sh
#   OLD=<commit> bench/old-weir.sh
#
# Checks:
#   new sender -> old receiver: the receiver offers no holes, so it gets a
#       version 1 stream with the holes as stored blocks of zeros: identical
#       (its copy is not sparse: an old weir writes the zeros)
#   new -z sender -> old receiver: a compressed stream cannot number the
#       holes as zeros blocks, so the sender refuses, exit 5, saying why
#   old sender -> new receiver: version 1, as before: identical
#   a recorded version 2 stream -> old weir -d: refused at its header, exit 6,
#       "unsupported weir stream version 2"
set -u
cd "$(dirname "$0")/.."
OLD=${OLD:-2f8e09e}
NEW=${WEIR:-build/weir}
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-old.XXXXXX")
trap 'rm -rf "$work"' EXIT
git archive "$OLD" | tar -x -C "$work" || exit 1
(cd "$work" && meson setup build -Dbuildtype=release >/dev/null && ninja -C build weir >/dev/null) \
    || { echo "old-weir.sh: could not build $OLD" >&2; exit 1; }
old=$work/build/weir
[ -x "$NEW" ] || ninja -C build >/dev/null
fails=0
check() { if [ "$1" = 0 ]; then echo "ok - $2"; else echo "FAIL - $2"; fails=$((fails + 1)); fi; }

f=$work/sparse
truncate -s 64M "$f"
head -c 1048576 /dev/urandom | dd of="$f" bs=1M seek=10 conv=notrunc status=none
head -c 100000 /dev/urandom | dd of="$f" bs=1M seek=40 conv=notrunc status=none

# transfer RECEIVER SENDER [SENDER OPTIONS...]: sets RX, TX, and the files
transfer() {
    local rx=$1 tx=$2
    shift 2
    rm -f "$work/copy" "$work/l.err"
    "$rx" -I 127.0.0.1:0 -o "$work/copy" 2>"$work/l.err" &
    local lpid=$!
    for _ in $(seq 100); do grep -q 'listening on' "$work/l.err" 2>/dev/null && break; sleep 0.05; done
    local port
    port=$(grep -o 'listening on .*' "$work/l.err" | grep -o '[0-9]*$')
    "$tx" -q "$@" -i "$f" -O "127.0.0.1:$port" 2>"$work/s.err"
    TX=$?
    wait "$lpid"
    RX=$?
}

transfer "$old" "$NEW"
cmp -s "$f" "$work/copy"
check $(( TX + RX + $? )) "new sender -> old receiver: exit $TX/$RX, identical ($(stat -c %b "$work/copy") blocks: zeros written)"
transfer "$old" "$NEW" -z
grep -q "cannot take them" "$work/s.err"
check $(( (TX == 5 ? 0 : 1) + $? )) "new -z sender -> old receiver: sender exit $TX: $(cat "$work/s.err")"
transfer "$NEW" "$old"
cmp -s "$f" "$work/copy"
check $(( TX + RX + $? )) "old sender -> new receiver: exit $TX/$RX, identical"
transfer "$NEW" "$old" -z
cmp -s "$f" "$work/copy"
check $(( TX + RX + $? )) "old -z sender -> new receiver: exit $TX/$RX, identical"

# a version 2 stream recorded between two new weirs, read by the old one
rm -f "$work/rec"
"$NEW" -q -I 127.0.0.1:0 -o /dev/null 2>"$work/l.err" &
lpid=$!
for _ in $(seq 100); do grep -q 'listening on' "$work/l.err" 2>/dev/null && break; sleep 0.05; done
port=$(grep -o 'listening on .*' "$work/l.err" | grep -o '[0-9]*$')
tt=$(ls build/tests/testtool 2>/dev/null || echo)
if [ -n "$tt" ]; then
    "$tt" proxy "$port" record 0 0 "$work/rec" >"$work/proxy" &
    ppid=$!
    for _ in $(seq 100); do grep -q 'proxy listening on' "$work/proxy" 2>/dev/null && break; sleep 0.05; done
    "$NEW" -q -i "$f" -O "127.0.0.1:$(grep -o '[0-9]*$' "$work/proxy")"
    wait "$lpid" "$ppid"
    tail -c +33 "$work/rec" >"$work/stream"
    "$old" -q -d -i "$work/stream" -o "$work/old.out" 2>"$work/d.err"
    st=$?
    check $(( (st == 6 ? 0 : 1) )) "recorded version 2 stream -> old weir -d: exit $st: $(cat "$work/d.err")"
    "$NEW" -q -d -i "$work/stream" -o "$work/new.out"
    cmp -s "$f" "$work/new.out"
    check $? "the same stream -> this weir -d: identical"
else
    kill "$lpid"
    echo "skip - no build/tests/testtool to record a stream"
fi
exit $((fails > 0))
