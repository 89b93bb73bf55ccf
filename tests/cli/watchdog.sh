#!/bin/bash
# Purpose: -W, the watchdog, fails only a real stall and blames the right
# end: a slow pipe that takes a large block a page at a time, a slow disk
# that takes seconds for one large write, and a worker
# that compresses one large block for seconds are not stalls; a reader that
# takes nothing is; a FIFO that nobody opens for reading fails the start; a
# sender that was admitted and then sends nothing is blamed, not the output.
. "$(dirname "$0")/lib.sh"

# ---- slow but moving: a block larger than the pipe, taken at 1 MiB/s ----------
gen "$TMP/in6" 6291456 random
"$WEIR" -q -W 1 -s 4M -m 16M -i "$TMP/in6" 2>"$TMP/slow.err" |
    "$WEIR" -q -R 1M -m 256k -s 64k >"$TMP/slow.out" 2>"$TMP/slow2.err"
st=("${PIPESTATUS[@]}")
[ "${st[0]}" -eq 0 ] || { cat "$TMP/slow.err" >&2; fail "-W 1 -s 4M into a pipe read at 1 MiB/s: exit ${st[0]}, want 0"; }
[ "${st[1]}" -eq 0 ] || { cat "$TMP/slow2.err" >&2; fail "the slow reader exited ${st[1]}"; }
same "$TMP/in6" "$TMP/slow.out" "-W 1: a 4 MiB block written into a slow pipe is not a stall"

# ---- slow but moving: a disk that takes 2 MiB a second (the fault shim) ---------
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
WEIR_FAULT=slow_write=2097152 LD_PRELOAD=$FAULTSHIM \
    "$WEIR" -q -W 1 -s 4M -i "$TMP/in6" >"$TMP/disk.out" 2>"$TMP/disk.err" ||
    { st=$?; cat "$TMP/disk.err" >&2; fail "-W 1 -s 4M onto a disk of 2 MiB/s: exit $st, want 0"; }
same "$TMP/in6" "$TMP/disk.out" "-W 1: a 4 MiB block written to a slow file is not a stall"

# ---- a worker busy with one large block ---------------------------------------
# LZ4HC level 12 takes seconds over 64 MiB of random data on one thread
N=$(sized 67108864 16777216)
gen "$TMP/rnd" "$N" random
expect 0 "-W 1 --compress=12 -s 64M -T 1" "$WEIR" -q -W 1 --compress=12 -s 64M -T 1 \
    -i "$TMP/rnd" -o "$TMP/rnd.lz4"
"$WEIR" -q -d -i "$TMP/rnd.lz4" -o "$TMP/rnd.back" || fail "decoding the level-12 file exited $?"
same "$TMP/rnd" "$TMP/rnd.back" "-W 1: compressing a large block is not a stall"

# ---- a real stall still fires: a pipe whose reader takes nothing -----------------
mkfifo "$TMP/stalled"
exec 7<>"$TMP/stalled"   # a reader that never reads
"$WEIR" -q -W 1 -s 4M -i "$TMP/in6" -o "$TMP/stalled" 2>"$TMP/stall.err" &
wpid=$!
PIDS+=("$wpid")
wait_bounded "$wpid" 15
exec 7<&-
[ "$STATUS" -eq 4 ] || { cat "$TMP/stall.err" >&2; fail "-W 1, a pipe nobody reads: exit $STATUS, want 4"; }
has_msg "$TMP/stall.err" "watchdog (-W 1): output $TMP/stalled took nothing for 1 s" \
    "-W: a pipe whose reader takes nothing is still a stall"

# ---- an output FIFO that nobody opens -------------------------------------------
mkfifo "$TMP/noreader"
"$WEIR" -q -W 1 -i "$TMP/in6" -o "$TMP/noreader" 2>"$TMP/fifo.err" &
wpid=$!
PIDS+=("$wpid")
wait_bounded "$wpid" 15
[ "$STATUS" -eq 4 ] || { cat "$TMP/fifo.err" >&2; fail "-W 1 -o FIFO without a reader: exit $STATUS, want 4"; }
has_msg "$TMP/fifo.err" "watchdog (-W 1): output $TMP/noreader: no reader opened the FIFO for 1 s" \
    "-W: a FIFO nobody opens for reading is named"
# a reader that comes while weir waits for it
"$WEIR" -q -W 5 -i "$TMP/in6" -o "$TMP/noreader" 2>"$TMP/fifo2.err" &
wpid=$!
PIDS+=("$wpid")
cat "$TMP/noreader" >"$TMP/fifo.out"
wait_bounded "$wpid" 15
[ "$STATUS" -eq 0 ] || { cat "$TMP/fifo2.err" >&2; fail "-W 5 -o FIFO with a reader: exit $STATUS"; }
same "$TMP/in6" "$TMP/fifo.out" "-W 5: a FIFO whose reader comes gets every byte"

# ---- a sender admitted by a listener, then silent before its first byte ---------
listen "$TMP/l.out" "$TMP/l.err" -q -W 1
mkfifo "$TMP/silent"
exec 8<>"$TMP/silent"    # the sender's input: open, never written
"$WEIR" -q -i "$TMP/silent" -O "127.0.0.1:$LPORT" 2>"$TMP/s.err" &
spid=$!
PIDS+=("$spid")
wait_bounded "$LPID" 15
[ "$STATUS" -eq 5 ] || { cat "$TMP/l.err" >&2; fail "-W 1, a silent sender: exit $STATUS, want 5"; }
has_msg "$TMP/l.err" "watchdog (-W 1): input 127.0.0.1:" "-W: the silent sender is blamed"
has_msg "$TMP/l.err" "sent nothing for 1 s" "-W: the sender sent nothing"
grep -q "took nothing" "$TMP/l.err" && { cat "$TMP/l.err" >&2; fail "-W blamed the output for a silent sender"; }
ok "-W does not blame the output for a sender that sent nothing"
wait_bounded "$spid" 15
exec 8<&-
[ "$STATUS" -eq 5 ] || { cat "$TMP/s.err" >&2; fail "the silent sender: exit $STATUS, want 5"; }
has_msg "$TMP/s.err" "receiver: watchdog (-W 1)" "the sender hears why"
done_testing
