#!/bin/bash
# Purpose: a sender stopped (SIGSTOP: a suspended machine, a paused VM, a
# debugger) for longer than the 10 s of silence that count as a break finds,
# once it runs again, the receiver's records that came meanwhile, and takes
# them before it judges the silence: mid-stream it goes on without a
# reconnection, and after the stream's end it takes the answer waiting for
# it and exits 0.  It used to read a record's first 8 bytes, find the
# deadline gone, and take the connection for broken ("the receiver said
# nothing for 10 s"): after the end, both had the data, the receiver exited 0
# and the sender 5.
. "$(dirname "$0")/lib.sh"
STOP_SECS=12   # longer than the silence that counts as a break (10 s)
gen "$TMP/in" 3000000 random

# stopped_for PID SECS: SIGSTOP PID, then SIGCONT it SECS later
stopped_for() {
    kill -STOP "$1" || fail "SIGSTOP $1"
    sleep "$2"   # the fault itself: how long the sender does not run
    kill -CONT "$1" || fail "SIGCONT $1"
}

# mid-stream: the sender paced by -R, stopped a second in
listen "$TMP/out" "$TMP/lerr" --reconnect 60
bg "$WEIR" --reconnect 60 -R 1M -i "$TMP/in" -O "127.0.0.1:$LPORT" 2>"$TMP/serr"
wait_size "$TMP/out" 500000 20
stopped_for "$BPID" "$STOP_SECS"
both_exit_0 "stopped mid-stream" "$BPID"
same "$TMP/in" "$TMP/out" "stopped mid-stream for $STOP_SECS s: both exit 0, whole"
! grep -q "reconnect" "$TMP/serr" ||
    { cat "$TMP/serr"; fail "stopped mid-stream: the sender took the pause for a break"; }
ok "stopped mid-stream: the receiver's keepalives were waiting, no reconnection"

# after the end: the receiver's consumer takes 2 s, so the answer comes
# while the sender is stopped; the receiver waits for the sender's word
# that it read it, which comes once the sender goes on
rm -f "$TMP/out"
listen /dev/null "$TMP/lerr" --reconnect 60 -- sh -c "cat >'$TMP/out'; sleep 2"
bg "$WEIR" --reconnect 60 -i "$TMP/in" -O "127.0.0.1:$LPORT" 2>"$TMP/serr"
SPID=$BPID
wait_size "$TMP/out" 2999999 20
kill -STOP "$SPID" || fail "SIGSTOP"
sleep "$STOP_SECS"   # the fault itself: the sender stays stopped past the silence
kill -0 "$LPID" 2>/dev/null || fail "the receiver did not wait for a stopped sender's word"
ok "the receiver waits for a stopped sender to say it read the answer"
kill -CONT "$SPID" || fail "SIGCONT"
both_exit_0 "stopped after the end" "$SPID"
same "$TMP/in" "$TMP/out" "stopped after the end for $STOP_SECS s: both exit 0, whole"
! grep -q "come back for it" "$TMP/lerr" ||
    { cat "$TMP/lerr"; fail "stopped after the end: the receiver gave up on the first connection"; }
ok "stopped after the end: the word came on the first connection"

done_testing
