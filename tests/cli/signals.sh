#!/bin/bash
# Purpose: SIGINT and SIGTERM stop the transfer with the summary and exit 128+N;
# SIGUSR1 prints the status line once and the transfer goes on.
. "$(dirname "$0")/lib.sh"
# Background jobs of a script start with SIGINT ignored; job control gives
# them their own process group and the default disposition.
set -m
for sig in INT TERM; do
    ( while :; do head -c 65536 /dev/zero || break; sleep 0.01; done ) | "$WEIR" -s 64k >/dev/null 2>"$TMP/err.$sig" &
    wpid=$!
    PIDS+=("$wpid")
    for i in 1 2 3 4 5; do sleep 0.05; done   # let some data flow first
    kill -s "$sig" "$wpid"
    wait_bounded "$wpid" 10
    want=$((128 + $(kill -l "$sig")))
    [ "$STATUS" -eq "$want" ] || { cat "$TMP/err.$sig"; fail "SIG$sig: exit $STATUS, want $want"; }
    ok "SIG$sig gives exit $want"
    has_msg "$TMP/err.$sig" "interrupted by SIG$sig" "SIG$sig is reported"
    has_msg "$TMP/err.$sig" "summary: INCOMPLETE" "SIG$sig still prints the summary"
done
mkfifo "$TMP/fifo"
"$WEIR" <"$TMP/fifo" >"$TMP/out" 2>"$TMP/err" &
wpid=$!
PIDS+=("$wpid")
exec 7>"$TMP/fifo"
echo hello >&7
wait_for "$TMP/out" "hello" 5
kill -USR1 "$wpid"
wait_for "$TMP/err" "total 6 B" 5
ok "SIGUSR1 prints the status line"
echo world >&7
exec 7>&-
wait_bounded "$wpid" 10
[ "$STATUS" -eq 0 ] || fail "weir exited $STATUS after SIGUSR1"
[ "$(cat "$TMP/out")" = "$(printf 'hello\nworld')" ] || fail "data after SIGUSR1"
ok "the transfer continues after SIGUSR1"
# a FIFO with no writer blocks open(): SIGTERM still stops weir at once
rm -f "$TMP/fifo"
mkfifo "$TMP/fifo"
"$WEIR" -q -i "$TMP/fifo" -o /dev/null 2>"$TMP/ferr" &
fpid=$!
PIDS+=("$fpid")
kill -0 "$fpid" || fail "weir on a FIFO did not start"
for i in $(seq 100); do   # until it is blocked in open(), waiting for a writer
    grep -q wait_for_partner "/proc/$fpid/wchan" 2>/dev/null && break
    sleep 0.05
done
grep -q wait_for_partner "/proc/$fpid/wchan" || fail "weir is not waiting in open() on the FIFO"
kill -TERM "$fpid"
wait_bounded "$fpid" 5
[ "$STATUS" -eq 143 ] || fail "SIGTERM while opening a FIFO: exit $STATUS, want 143"
has_msg "$TMP/ferr" "interrupted by SIGTERM" "SIGTERM while opening a FIFO: exit 143"
# a signal to the whole process group kills the producer too: weir exits
# 128+N, never 3 for the producer's death, even when that death is noticed
# first (the shim keeps the main thread from taking its own signal for
# 300 ms; doc/faults.md row 259)
: "${FAULTSHIM:?FAULTSHIM must name the fault shim}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
for sig in TERM HUP; do
    rm -f "$TMP/gout"
    WEIR_FAULT=sigwait_late=300 LD_PRELOAD=$FAULTSHIM "$WEIR" -q -o "$TMP/gout" -- \
        sh -c "head -c 100000 /dev/zero; kill -$sig 0; sleep 5" 2>"$TMP/gerr" &
    gpid=$!
    PIDS+=("$gpid")
    wait_bounded "$gpid" 10
    want=$((128 + $(kill -l "$sig")))
    [ "$STATUS" -eq "$want" ] || { cat "$TMP/gerr"; fail "SIG$sig to the group: exit $STATUS, want $want"; }
    has_msg "$TMP/gerr" "interrupted by SIG$sig" "SIG$sig to the group, the producer's death seen first: exit $want"
done
# SIGINT to a weir started with SIGINT ignored (as a script's background
# job is, without job control), while its setup waits for a FIFO's reader:
# it is taken once setup is over (putting back the ignored action discarded
# it, and the transfer ran on for ever)
mkfifo "$TMP/setup.fifo"
bg sh -c 'trap "" INT; exec "$0" -q -i /dev/zero -o "$1"' "$WEIR" "$TMP/setup.fifo"
# once weir blocks SIGINT (its setup has begun): the signal then waits
for _ in $(seq 250); do
    blk=$(awk '/^SigBlk/ {print $2}' /proc/"$BPID"/status 2>/dev/null)
    [ -n "$blk" ] && [ $((0x$blk & 2)) -ne 0 ] && break
    sleep 0.02
done
[ $((0x${blk:-0} & 2)) -ne 0 ] || fail "weir never blocked SIGINT"
kill -INT "$BPID"
cat "$TMP/setup.fifo" >/dev/null &
PIDS+=($!)
wait_bounded "$BPID" 10
[ "$STATUS" -eq 130 ] || fail "SIGINT during setup, SIGINT ignored by the shell: exit $STATUS, want 130"
ok "SIGINT during setup to a background weir whose SIGINT was ignored: 130"

# SIGINT to a receiver that waits for its sender to come back for the answer
# (the sender killed after its trailer, while the consumer worked): that wait
# runs after the engine's loop, and took no signal for up to 35 s
gen "$TMP/home" 3000000 random
rm -f "$TMP/home.out"
listen /dev/null "$TMP/lerr" --reconnect 60 -- sh -c "cat >'$TMP/home.out'; sleep 2"
bg "$WEIR" --reconnect 60 -i "$TMP/home" -O "127.0.0.1:$LPORT" 2>"$TMP/serr"
wait_size "$TMP/home.out" 2999999 20
kill -9 "$BPID"
# (the receiver sees the break as it comes, while its consumer works)
wait_for "$TMP/lerr" "the connection broke after the whole stream arrived; waiting up to" 20
kill -INT "$LPID"
wait_bounded "$LPID" 3
[ "$STATUS" -eq 130 ] || { cat "$TMP/lerr"; fail "SIGINT while waiting for the answer to go home: exit $STATUS"; }
ok "SIGINT while the receiver waits for its sender to come back for the answer: 130 at once"
# SIGINT to a receiver that waits, after its answer, for the sender's word
# that it read it (the sender stopped): that wait runs after the engine's
# loop too, and ends at once
rm -f "$TMP/home.out"
listen /dev/null "$TMP/lerr" --reconnect 60 -- sh -c "cat >'$TMP/home.out'; sleep 1"
bg "$WEIR" --reconnect 60 -i "$TMP/home" -O "127.0.0.1:$LPORT" 2>"$TMP/serr"
wait_size "$TMP/home.out" 2999999 20
kill -STOP "$BPID"
# the answer goes a second after the consumer has everything; then the wait
sleep 2   # the fault's own timing: the receiver answers a stopped sender
kill -0 "$LPID" 2>/dev/null || fail "the receiver did not wait for a stopped sender's word"
kill -INT "$LPID"
wait_bounded "$LPID" 3
[ "$STATUS" -eq 130 ] || { cat "$TMP/lerr"; fail "SIGINT while waiting for the sender's word: exit $STATUS"; }
ok "SIGINT while the receiver waits for a stopped sender's word: 130 at once"
kill -9 "$BPID"

done_testing
