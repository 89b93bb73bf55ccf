#!/bin/bash
# Purpose: weir runs the producer (no input given) or the consumer (an input
# given) after --, and their failures reach both ends: a producer that exits
# non-zero, is killed or is not found fails the sender (3) and aborts the
# stream; a consumer that fails fails the receiver (4) and the sender (4, with
# the consumer's last stderr line); a consumer still working after its input
# ended is waited for, past --timeout; signals leave no child behind.
. "$(dirname "$0")/lib.sh"
set -m   # background jobs get SIGINT at its default, in their own group
big=$(sized $((20 << 20)) $((5 << 20)))
gen "$TMP/big" "$big" mixed
gen "$TMP/one" 1 random
: >"$TMP/empty"

# round trips: a producer over loopback, a consumer on the far side
for f in empty one big; do
    for z in "" -z; do
        listen /dev/null "$TMP/lerr" -q -- sh -c "cat >\"$TMP/got\""
        expect 0 "producer -> consumer, $f $z" "$WEIR" -q $z -O "127.0.0.1:$LPORT" -- cat "$TMP/$f"
        wait_bounded "$LPID" 20
        [ "$STATUS" -eq 0 ] || fail "receiver with a consumer: exit $STATUS"
        same "$TMP/$f" "$TMP/got" "producer and consumer over loopback: $f $z"
    done
done
# over pipes: a producer alone, a consumer beside a -o file
"$WEIR" -q -- cat "$TMP/big" >"$TMP/p.out" || fail "producer to stdout: exit $?"
same "$TMP/big" "$TMP/p.out" "a producer's output on stdout"
expect 0 "a consumer beside -o" "$WEIR" -q -i "$TMP/big" -o "$TMP/o.out" -- sh -c "cat >\"$TMP/c.out\""
same "$TMP/big" "$TMP/o.out" "the -o file beside a consumer"
same "$TMP/big" "$TMP/c.out" "the consumer beside a -o file"
echo hello | "$WEIR" -q -i - -- sh -c 'cat; echo bye' >"$TMP/cs.out" || fail "consumer's stdout"
printf 'hello\nbye\n' | cmp -s - "$TMP/cs.out" || fail "the consumer's stdout is not weir's"
ok "the consumer's standard output is weir's"
"$WEIR" -q -- sh -c 'read x && echo "stdin gave $x" || echo "stdin empty"' >"$TMP/pin" </dev/zero
has_msg "$TMP/pin" "stdin empty" "the producer's standard input is /dev/null"
"$WEIR" -q -- sh -c 'echo to-stderr >&2; echo data' >"$TMP/pout" 2>"$TMP/perr"
has_msg "$TMP/perr" "to-stderr" "the producer's stderr passes through"

# the producer fails: the sender says so (3); the receiver is told (3) and its
# consumer never sees a clean end.  "early": it fails at once, before the
# connection is made; "early-data": within milliseconds, before the sender
# has read the receiver's greeting (doc/faults.md row 255: the sender then
# connects once more to tell the receiver)
for how in "exit 1" "kill -9 \$\$" "notfound" early early-data early early-data; do
    listen /dev/null "$TMP/lerr" -- sh -c "cat >\"$TMP/got\"; echo consumer-finished >\"$TMP/fin\""
    rm -f "$TMP/fin"
    case $how in
    notfound) cmd=(weir-no-such-command) ;;
    early) cmd=(sh -c "exit 1") ;;
    early-data) cmd=(sh -c "head -c 3000000 \"$TMP/big\"; exit 1") ;;
    # the failure comes once the stream is under way
    *) cmd=(sh -c "head -c 3000000 \"$TMP/big\"; sleep 0.5; $how") ;;
    esac
    expect 3 "producer: $how" "$WEIR" -q -O "127.0.0.1:$LPORT" -- "${cmd[@]}"
    case $how in
    notfound)
        has_msg "$TMP/err" "producer 'weir-no-such-command': cannot run it: No such file or directory" \
            "a producer that is not found is named"
        grep -q "connection from" "$TMP/lerr" && fail "weir connected although the producer could not start"
        ok "nothing was connected before the producer failed to start"
        kill "$LPID"
        continue ;;
    "exit 1" | early*) has_msg "$TMP/err" "exited with status 1" "producer $how: the sender says so" ;;
    *) has_msg "$TMP/err" "was killed by SIGKILL" "producer killed: the sender says so" ;;
    esac
    wait_bounded "$LPID" 20
    [ "$STATUS" -eq 3 ] || { cat "$TMP/lerr"; fail "receiver of a failed producer ($how): exit $STATUS, want 3"; }
    has_msg "$TMP/lerr" "weir: sender: producer '" "the receiver names the sender's producer ($how)"
    [ -e "$TMP/fin" ] && fail "the consumer saw a clean end of a failed stream ($how)"
    ok "the receiver's consumer was terminated, not given a clean end ($how)"
done

# the producer fails while the sender waits for the receiver's greeting (the
# proxy leaves each connection alone for 1 s): the sender resets that
# connection, connects once more and tells the receiver, which used to keep
# listening (doc/faults.md row 255)
listen /dev/null "$TMP/lerr" -- sh -c "cat >\"$TMP/got\"; echo consumer-finished >\"$TMP/fin\""
rm -f "$TMP/fin"
cut_proxy "$LPORT" 0 1 reset 0 --hold 1
expect 3 "producer fails before the greeting" "$WEIR" -O "127.0.0.1:$PPORT" -- sh -c 'exit 1'
has_msg "$TMP/err" "the stream failed before it began: connecting once more to tell the receiver" \
    "the sender tells the receiver of a stream that failed before it began"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 3 ] || { cat "$TMP/lerr"; fail "receiver of a producer that failed before the greeting: exit $STATUS, want 3"; }
has_msg "$TMP/lerr" "weir: sender: producer 'exit 1' exited with status 1" \
    "the receiver names the producer that failed before the greeting"
[ -e "$TMP/fin" ] && fail "the consumer saw a clean end of a stream that failed before it began"
ok "the receiver's consumer was terminated (producer failed before the greeting)"
kill "$PPID_"
wait "$PPID_" 2>/dev/null

# a producer whose last words end without a newline: weir's own line still
# begins a line (it was glued to them, out of reach of a line-based reader)
expect 3 "a producer's stderr without a final newline" \
    "$WEIR" -o /dev/null -- sh -c 'printf "no newline" >&2; exit 1'
grep -q "^weir: producer 'printf" "$TMP/err" || { cat "$TMP/err"; fail "weir's line glued to the producer's"; }
ok "weir's message begins its own line after a producer's unfinished one"

# the consumer fails: both ends exit 4; the sender quotes its last stderr line
consumer_fails() {   # consumer_fails LABEL CONSUMER-SCRIPT MESSAGE
    listen /dev/null "$TMP/lerr" -q -- sh -c "$2"
    expect 4 "$1: sender" "$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/big"
    has_msg "$TMP/err" "weir: receiver: consumer '" "$1: the sender names the consumer"
    has_msg "$TMP/err" "$3" "$1: the sender gives its reason"
    wait_bounded "$LPID" 20
    [ "$STATUS" -eq 4 ] || fail "$1: receiver exit $STATUS, want 4"
    ok "$1: the receiver exits 4"
}
consumer_fails "consumer exits 1 after reading all" \
    'cat >/dev/null; echo "cannot receive: destination tank has been modified" >&2; exit 1' \
    "exited with status 1: cannot receive: destination tank has been modified"
consumer_fails "consumer exits 1 after reading half" \
    "head -c $((big / 2)) >/dev/null; echo 'out of space' >&2; exit 1" \
    "exited with status 1: out of space"
consumer_fails "consumer killed" 'head -c 1000000 >/dev/null; kill -9 $$' "was killed by SIGKILL"

# a consumer that reads slowly, then works 5 s after its input ends: the
# sender (--timeout 2) waits, says what it waits for, and exits 0
gen "$TMP/mid" 3000000 random
listen /dev/null "$TMP/lerr" -q -- sh -c "\"$TESTTOOL\" slowread 2000000 >\"$TMP/slow\"; sleep 5"
expect 0 "sender --timeout 2 waits for a consumer that finishes 5 s later" \
    "$WEIR" -q --timeout 2 -O "127.0.0.1:$LPORT" -i "$TMP/mid"
same "$TMP/mid" "$TMP/slow" "the slow consumer got every byte"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "receiver of the slow consumer: exit $STATUS"

# SIGTERM to a sender and to a receiver with children: no child survives
"$WEIR" -q -O 127.0.0.1:1 --connect-timeout 60 -- sh -c "echo \$\$ >\"$TMP/prod.pid\"; exec sleep 100" \
    2>/dev/null &
spid=$!
PIDS+=("$spid")
wait_size "$TMP/prod.pid" 0 10
kill -TERM "$spid"
wait_bounded "$spid" 15
[ "$STATUS" -eq 143 ] || fail "sender with a producer, SIGTERM: exit $STATUS"
kill -0 "$(cat "$TMP/prod.pid")" 2>/dev/null && fail "the producer survived its weir"
ok "SIGTERM to a sender: exit 143, its producer is gone"
listen /dev/null "$TMP/lerr" -q -- sh -c "echo \$\$ >\"$TMP/cons.pid\"; exec sleep 100"
wait_size "$TMP/cons.pid" 0 10
kill -TERM "$LPID"
wait_bounded "$LPID" 15
[ "$STATUS" -eq 143 ] || fail "receiver with a consumer, SIGTERM: exit $STATUS"
kill -0 "$(cat "$TMP/cons.pid")" 2>/dev/null && fail "the consumer survived its weir"
ok "SIGTERM to a receiver: exit 143, its consumer is gone"
"$WEIR" -q -i "$TMP/big" -- sh -c "trap '' TERM; echo \$\$ >\"$TMP/stub.pid\"; exec sleep 100" &
spid=$!
PIDS+=("$spid")
wait_size "$TMP/stub.pid" 0 10
kill -TERM "$spid"
wait_bounded "$spid" "$(sized 20 40)"
kill -0 "$(cat "$TMP/stub.pid")" 2>/dev/null && fail "a consumer that ignores SIGTERM survived"
ok "a consumer that ignores SIGTERM is killed after the grace period"

# a consumer that ignores SIGTERM keeps its input open until it is gone:
# it never reads a clean end of a stream that failed (it used to get EOF at
# once, and could commit what it had); slow enough that the stream is not
# whole before the signal, sanitized or not
rm -f "$TMP/committed"
"$WEIR" -q -r "$(sized 5M 1M)" -i "$TMP/big" -- python3 -c "
import signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open('$TMP/ign.pid', 'w').write('1')
data = sys.stdin.buffer.read()
open('$TMP/committed', 'w').write(str(len(data)))" 2>/dev/null &
spid=$!
PIDS+=("$spid")
wait_size "$TMP/ign.pid" 0 10
kill -TERM "$spid"
wait_bounded "$spid" "$(sized 20 40)"
[ "$STATUS" -eq 143 ] || fail "a consumer that ignores SIGTERM: weir exit $STATUS, want 143"
[ -e "$TMP/committed" ] && fail "a consumer that ignores SIGTERM read a clean end: $(cat "$TMP/committed") bytes"
ok "a consumer that ignores SIGTERM never reads the end of a stopped stream"

# a consumer that exits 0 with less than a pipe's worth unread: no write
# fails, but the bytes it left are found (it used to exit 0)
gen "$TMP/s60k" 60000 random
expect 4 "a consumer that leaves 59900 bytes unread" \
    "$WEIR" -q -i "$TMP/s60k" -- sh -c 'head -c 100 >/dev/null; sleep 0.2'
has_msg "$TMP/err" "exited with status 0 before it read all its input (59900 bytes unread)" \
    "a consumer that leaves bytes unread: says how many"
expect 4 "a consumer that reads nothing of 60000 bytes" "$WEIR" -q -i "$TMP/s60k" -- true
has_msg "$TMP/err" "exited with status 0 before it read all its input" \
    "a consumer that reads nothing: says so"

# the rule and its usage errors
expect 2 "-o - beside a consumer" "$WEIR" -i "$TMP/one" -o - -- cat
has_msg "$TMP/err" "-o - and the consumer after -- both write to standard output" "-o - and a consumer: says why"
expect 2 "-- without a command" "$WEIR" -i "$TMP/one" --
has_msg "$TMP/err" "no command after it" "-- alone: says why"
expect 2 "a stray argument before --" "$WEIR" stray -- cat
done_testing
