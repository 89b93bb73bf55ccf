#!/bin/bash
# Purpose: over TCP the receiver catches a sender that dies mid-stream, and the
# sender learns of a receiver that fails: exit statuses and messages on both ends.
. "$(dirname "$0")/lib.sh"
# Background jobs of a script start with SIGINT ignored; job control gives
# them their own process group and the default disposition.
set -m

# 1. sender killed with SIGKILL mid-stream: the receiver must fail.  Without
# resuming (--reconnect 0) it fails at once; with it, it waits --reconnect
# for the sender to come back, then fails saying so (it never comes: it is dead)
kill_sender() {   # kill_sender RECEIVER-OPTIONS...
    listen "$TMP/out" "$TMP/lerr" -q "$@"
    ( while :; do head -c 65536 /dev/urandom || break; sleep 0.01; done ) \
        | "$WEIR" -q -O "127.0.0.1:$LPORT" 2>/dev/null &
    spid=$!
    PIDS+=("$spid")
    wait_size "$TMP/out" 200000 10
    kill -0 "$LPID" 2>/dev/null || fail "receiver ended early"
    pkill -9 -P $$ -f "$WEIR -q -O 127.0.0.1:$LPORT" || kill -9 "$spid"
    wait_bounded "$LPID" 10
}
kill_sender --reconnect 0
# the kernel closes a killed sender's socket with a FIN, or with a reset when
# a keepalive from the receiver was still unread in it: either way the
# stream is incomplete and the receiver says so
case $STATUS in
6) has_msg "$TMP/lerr" "truncated weir stream" "receiver of a killed sender: exit 6, truncated" ;;
5) has_msg "$TMP/lerr" "Connection reset by peer" "receiver of a killed sender: exit 5, reset" ;;
*) cat "$TMP/lerr"; fail "receiver of a killed sender: exit $STATUS, want 6 or 5" ;;
esac
kill_sender --reconnect 2
[ "$STATUS" -eq 5 ] || { cat "$TMP/lerr"; fail "resumable receiver of a killed sender: exit $STATUS"; }
has_msg "$TMP/lerr" "the sender did not come back within 2 s" \
    "a receiver that may resume gives a killed sender --reconnect, then exits 5"

# 2. receiver's output is /dev/full: the sender stops early with its message
rm -f "$TMP/lerr"   # never read a previous listener's port
"$WEIR" -q -I 0 -o /dev/full 2>"$TMP/lerr" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/lerr" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/lerr" | grep -o '[0-9]*$')
bg "$WEIR" -q -O "127.0.0.1:$port" -i /dev/zero
exec 3>"$TMP/serr"
wait_bounded "$BPID" 15
sst=$STATUS
[ "$sst" -eq 4 ] || fail "sender to a full disk: exit $sst, want 4"
ok "sender of an endless stream stops with exit 4 when the receiver's disk is full"
wait_bounded "$LPID" 10
[ "$STATUS" -eq 4 ] || fail "receiver with /dev/full: exit $STATUS"
ok "receiver exits 4"
listen /dev/null "$TMP/lerr" -q -o /dev/full
"$WEIR" -q -O "127.0.0.1:$LPORT" -i /dev/zero 2>"$TMP/serr"
[ $? -eq 4 ] || fail "sender exit"
has_msg "$TMP/serr" "weir: receiver: output /dev/full: write: No space left on device" "sender prints the receiver's message"

# 3. a slow receiver: the sender exits only after everything is written
gen "$TMP/in" 3000000 random
listen /dev/null "$TMP/lerr" -q -R 3M -o "$TMP/slow.out"
"$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "sender to a slow receiver exited $?"
same "$TMP/in" "$TMP/slow.out" "when the sender exits 0 the slow receiver has written everything"
wait_bounded "$LPID" 10

# 3b. --timeout measures silence, not the drain: a receiver at -R 2M needs
# about 5 s after the sender's last byte, longer than the sender's --timeout 2;
# it keeps saying so, and the sender waits and exits 0
gen "$TMP/in10" 10000000 random
listen /dev/null "$TMP/lerr" -q -R 2M -m 64M -o "$TMP/drain.out"
expect 0 "sender with --timeout 2 to a receiver draining for 5 s" \
    "$WEIR" -q --timeout 2 -O "127.0.0.1:$LPORT" -i "$TMP/in10"
same "$TMP/in10" "$TMP/drain.out" "the drain outlasted --timeout and every byte arrived"
wait_bounded "$LPID" 10
[ "$STATUS" -eq 0 ] || fail "draining receiver: exit $STATUS"

# 3c. a receiver that falls silent (stopped) fails its sender after
# --timeout; without resuming at once, and with it once --reconnect has
# run out too (a session that may resume takes the silence for a break)
for rc in 0 2; do
    rm -f "$TMP/stopped.out"
    listen /dev/null "$TMP/lerr" -q -R 1M -m 64M -o "$TMP/stopped.out"
    bg "$WEIR" -q --timeout 2 --reconnect "$rc" -O "127.0.0.1:$LPORT" -i "$TMP/in" 2>"$TMP/serr3"
    spid=$BPID
    wait_size "$TMP/stopped.out" 500000 10   # the 3 MB were sent at once; the drain is on
    kill -STOP "$LPID"
    wait_bounded "$spid" 20
    [ "$STATUS" -eq 5 ] || fail "sender of a stopped receiver, --reconnect $rc: exit $STATUS, want 5"
    if [ "$rc" -eq 0 ]; then
        has_msg "$TMP/serr3" "the receiver fell silent for 2 s before it answered" \
            "the sender of a receiver that fell silent exits 5 and says so"
    else
        # the 3 MB fit in the sockets' buffers, so the stream's end is out
        # before the stop; on a loaded machine it may not be yet, and then
        # the sender's write is what falls silent
        grep -qE "the receiver (said nothing for 2 s after the stream's end|took nothing for 2 s)" \
            "$TMP/serr3" || { cat "$TMP/serr3" >&2; fail "--reconnect 2: the silence is not taken for a break"; }
        ok "--reconnect 2: the sender takes the silence for a break"
        has_msg "$TMP/serr3" "no new one could be made within 2 s" \
            "--reconnect 2: and exits 5 once the window is over"
    fi
    kill -CONT "$LPID"
    kill "$LPID"
done

# 4. the receiver is interrupted: the sender fails with its reason
listen /dev/null "$TMP/lerr" -R 1M -o /dev/null
bg "$WEIR" -q -O "127.0.0.1:$LPORT" -i /dev/zero
spid=$BPID
wait_for "$TMP/lerr" "connection from" 10   # the transfer is under way
kill -INT "$LPID"
wait_bounded "$LPID" 10
[ "$STATUS" -eq 130 ] || fail "interrupted receiver: exit $STATUS"
ok "interrupted receiver exits 130"
wait_bounded "$spid" 10
[ "$STATUS" -eq 5 ] || fail "sender of an interrupted receiver: exit $STATUS, want 5"
ok "its sender exits 5"

# 5. the sender is interrupted: the receiver sees an abort, not a clean end
listen "$TMP/out" "$TMP/lerr"
( while :; do head -c 65536 /dev/zero || break; sleep 0.01; done ) | "$WEIR" -q -O "127.0.0.1:$LPORT" 2>"$TMP/serr" &
spid=$!
PIDS+=("$spid")
wait_size "$TMP/out" 100000 10
pkill -INT -f "$WEIR -q -O 127.0.0.1:$LPORT"
wait_bounded "$spid" 10
[ "$STATUS" -eq 130 ] || fail "interrupted sender: exit $STATUS"
ok "interrupted sender exits 130"
wait_bounded "$LPID" 10
[ "$STATUS" -eq 5 ] || fail "receiver of an interrupted sender exited $STATUS, want 5"
has_msg "$TMP/lerr" "weir: sender: interrupted by SIGINT" \
    "the receiver of an interrupted sender exits 5 and says why (the abort record arrived)"
done_testing
