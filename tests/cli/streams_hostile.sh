#!/bin/bash
# streams_hostile.sh - a spread transfer (--streams) against peers that do
# not follow the script, played by tests/tools/joiner.c (a fake sender
# without a key that speaks weir's records and chunks): a join with no
# transfer under way; joins during the gathering with another token,
# without the streams bit, with index and count the format forbids or that
# contradict the others, a header instead; a sender whose other connections
# never come; chunks that lie (a length of 0 or 0xffffffff), go backwards,
# come twice, end in the middle, leave a gap, stall the window, or trail
# junk; a join during a running transfer; a join with a wrong checksum; a
# plain stranger while a receiver as mbuffer gathers.  Each case asserts
# the receiver's exit status and its message, or that it refused and went
# on; each real transfer ends in a comparison of what arrived.  Loopback,
# port 0.
. "$(dirname "$0")/lib.sh"
: "${JOINER:?JOINER must name tests/tools/joiner}"
cd "$TMP" || exit 1

# the weir stream a sender sends over one connection, to be dealt out
gen in 1048599 random
weir_stream in stream.bin --streams 1
[ "$(head -c 13 stream.bin | tail -c 5)" = HWEIR ] || fail "stream.bin does not begin with a header"
ok "a weir stream to deal out ($(stat -c %s stream.bin) bytes)"

# token_of FILE: wait for the fake lead's "token HEX" in FILE; sets TOKEN
token_of() {
    wait_for "$1" "token " 10
    TOKEN=$(awk '/^token /{print $2}' "$1")
    [ ${#TOKEN} -eq 32 ] || fail "no token in $(cat "$1")"
}

# expect_out FILE STATUS LABEL CMD...: as expect, with CMD's output in FILE
expect_out() {
    local file=$1 want=$2 label=$3
    shift 3
    "$@" >"$file" 2>"$TMP/err"
    local got=$?
    [ "$got" -eq "$want" ] || { cat "$file" "$TMP/err" >&2; fail "$label: exit $got, want $want"; }
    ok "$label (exit $want)"
}

# joins LABEL WANT ARGS...: a joiner's join (joiner join 127.0.0.1 $LPORT
# ARGS) prints WANT (exit 0)
joins() {
    local label=$1 want=$2
    shift 2
    expect_out join.out 0 "$label" "$JOINER" join 127.0.0.1 "$LPORT" "$@"
    has_msg join.out "$want" "$label: the joiner saw '$want'"
}

# ---- a join with no transfer under way -------------------------------------
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out
joins "a join to a receiver with no transfer" "refused: it asked to join a transfer this listener does not have" \
    0123456789abcdef0123456789abcdef 1 2
has_msg "$TMP/rx.err" "refused connection from 127.0.0.1" "the receiver logs the refusal"
kill -0 "$LPID" 2>/dev/null || fail "the receiver left after refusing the join"
ok "the receiver still waits for its sender"
expect 0 "then a real sender spreads over 3" "$WEIR" --streams 3 -i in -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS"; }
ok "the receiver exits 0"
same in out "what arrived after the refused join is what was sent"
has_msg "$TMP/rx.err" "the transfer comes over 3 connections" "it came over 3 connections"

# ---- strangers and liars while the receiver gathers ------------------------
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out --timeout 5
rm -f go
JOINER_GO=$TMP/go "$JOINER" run 127.0.0.1 "$LPORT" stream.bin 3 honest >run.out 2>&1 &
RPID=$!
PIDS+=("$RPID")
token_of run.out
joins "a join with another token" "refused: it asked to join a transfer this listener does not have" \
    00000000000000000000000000000000 1 3
joins "a join without the streams bit in its greeting" "refused: it asked to join a transfer" \
    "$TOKEN" 1 3 nofeature
joins "a join as connection 0" "refused: malformed weir join record" "$TOKEN" 0 3
joins "a join as connection 3 of 3" "refused: malformed weir join record" "$TOKEN" 3 3
joins "a join of 17 connections" "refused: malformed weir join record" "$TOKEN" 1 17
joins "a join of 1 connection" "refused: malformed weir join record" "$TOKEN" 1 1
joins "a stream header while the receiver gathers" \
    "refused: a transfer is under way here: this listener takes only its connections" \
    "$TOKEN" 1 3 header
has_msg "$TMP/rx.err" "refused connection from 127.0.0.1" "the receiver logs them"
kill -0 "$LPID" 2>/dev/null || fail "the receiver left during the gathering"
ok "the receiver still gathers"
touch go
wait_bounded "$RPID" 30
[ "$STATUS" -eq 0 ] || { cat run.out; fail "the fake sender exited $STATUS"; }
has_msg run.out "joined 2" "the sender's own connections join after all that"
has_msg run.out "answer 0" "its answer is success"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS"; }
ok "the receiver exits 0"
same in out "the transfer is whole despite the strangers"

# ---- a place taken twice, a count that contradicts, no one else ------------
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out --timeout 2
rm -f lead.out   # the last lead's token must not be read for this one's
"$JOINER" lead 127.0.0.1 "$LPORT" 15 >lead.out 2>&1 &
JPID=$!
PIDS+=("$JPID")
token_of lead.out
joins "connection 2 of 3 joins" "joined" "$TOKEN" 1 3
"$JOINER" join 127.0.0.1 "$LPORT" "$TOKEN" 1 3 >join.out 2>&1
grep -q '^joined' join.out && fail "a second connection 2 of 3 was taken"
ok "a second connection 2 of 3 is not taken"
wait_for "$TMP/rx.err" "another connection took its place" 10
ok "the receiver says another connection took its place"
"$JOINER" join 127.0.0.1 "$LPORT" "$TOKEN" 2 4 >join.out 2>&1
grep -q '^joined' join.out && fail "a connection that counts 4 was taken into a transfer of 3"
ok "a connection that counts 4 is not taken into a transfer of 3"
wait_for "$TMP/rx.err" "it counts the connections differently" 10
ok "the receiver says it counts the connections differently"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 5 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS, want 5"; }
ok "the receiver whose connections never all join exits 5"
has_msg "$TMP/rx.err" "the sender's other connections did not all join within 2 s" \
    "the receiver says the connections did not all join"
has_msg "$TMP/rx.err" "summary: INCOMPLETE" "and its summary says INCOMPLETE"
wait_bounded "$JPID" 20

# ---- chunks that lie --------------------------------------------------------
# plan PLAN STATUS MESSAGE [RECEIVER OPTIONS...]: the fake sender deals the
# stream as PLAN says over 3 connections; the receiver exits STATUS with
# MESSAGE, and the fake sender's answer says the same
plan() {
    local p=$1 want=$2 msg=$3
    shift 3
    rm -f out
    listen "$TMP/rx.out" "$TMP/rx.err" -f -o out --timeout 10 "$@"
    expect_out run.out 0 "the fake sender's plan $p" "$JOINER" run 127.0.0.1 "$LPORT" \
        stream.bin 3 "$p"
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq "$want" ] || { cat "$TMP/rx.err" run.out; fail "$p: the receiver exited $STATUS, want $want"; }
    ok "$p: the receiver exits $want"
    has_msg "$TMP/rx.err" "$msg" "$p: the receiver says why"
    has_msg run.out "answer $want " "$p: its answer to the sender says $want"
    if [ "$want" -ne 0 ]; then
        has_msg "$TMP/rx.err" "summary: INCOMPLETE" "$p: the summary says INCOMPLETE"
    else
        same in out "$p: what arrived is what was sent"
    fi
}
plan honest 0 "the transfer comes over 3 connections"
plan stall 6 "the chunk the stream needs is on no connection"
plan huge 6 "not a chunk of a weir stream"
plan zero 6 "not a chunk of a weir stream"
plan backward 6 "a chunk out of its connection's order"
plan cut 5 "the connection ended inside a chunk"
plan gapclose 6 "chunk 1 of the stream never came"
plan gaphold 5 "no progress for 2 s" --timeout 2
plan tailjunk 6 "junk after the end of the weir stream"
# a chunk carried twice: refused as one the stream has, or as one another
# connection carries, whichever the receiver sees first
rm -f out
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out --timeout 10
expect_out run.out 0 "the fake sender's plan dup" "$JOINER" run 127.0.0.1 "$LPORT" stream.bin 3 dup
wait_bounded "$LPID" 30
[ "$STATUS" -eq 6 ] || { cat "$TMP/rx.err"; fail "dup: the receiver exited $STATUS, want 6"; }
ok "dup: the receiver exits 6"
grep -qE "a chunk the stream already has|a chunk another connection carried" "$TMP/rx.err" ||
    { cat "$TMP/rx.err"; fail "dup: the receiver does not say the chunk came twice"; }
ok "dup: the receiver says the chunk came twice"

# ---- a join during a running transfer ---------------------------------------
gen big $(sized 8388617 4194319) random
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out
"$WEIR" --streams 4 -R 2M -i big -O "127.0.0.1:$LPORT" 2>tx.err &
TPID=$!
PIDS+=("$TPID")
wait_for "$TMP/rx.err" "comes over 4 connections" 20
"$JOINER" join 127.0.0.1 "$LPORT" 0123456789abcdef0123456789abcdef 1 4 >join.out 2>&1
grep -q '^joined' join.out && fail "a stranger's join was taken during the transfer"
grep -qE "^refused: |^failed: connect" join.out || { cat join.out; fail "the stranger's join: $(cat join.out)"; }
ok "a stranger's join during the transfer is refused ($(head -c 60 join.out))"
wait_bounded "$TPID" 60
[ "$STATUS" -eq 0 ] || { cat tx.err; fail "the spread sender exited $STATUS"; }
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS"; }
ok "both ends exit 0"
same big out "the spread transfer is unharmed by the join"

# ---- found by this test, and mended ------------------------------------------
# a 'J' whose checksum is wrong is a corrupt record, as 'N' or 'R' would be
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out --timeout 2
rm -f lead.out   # the last lead's token must not be read for this one's
"$JOINER" lead 127.0.0.1 "$LPORT" 15 >lead.out 2>&1 &
JPID=$!
PIDS+=("$JPID")
token_of lead.out
joins "a join whose checksum is wrong" "refused: corrupt weir record (checksum mismatch)" \
    "$TOKEN" 1 2 badsum
wait_bounded "$LPID" 20
wait_bounded "$JPID" 20

# a chunk left over beyond a gap when every connection ended: a stream
# with a hole, which fails it as junk after the trailer does
plan gapjunk 6 "never came, and chunks after it did"

# weir as mbuffer (it takes plain bytes too): a plain stranger that knocks
# while the receiver gathers is refused, and the gathering goes on
# (it tells a weir sender from a plain one by the mark in its SYN, which
# only Linux keeps: elsewhere every sender of weir as mbuffer is plain)
if on_linux "weir's mark in the SYN (TCP_SAVED_SYN)"; then
    mkdir -p bin
    ln -sf "$(readlink -f "$WEIR")" bin/mbuffer
    rm -f "$TMP/rx.err" out go
    bin/mbuffer -I 0 -q >out 2>"$TMP/rx.err" &
    LPID=$!
    PIDS+=("$LPID")
    wait_for "$TMP/rx.err" "listening on" 10
    LPORT=$(grep -o 'listening on .*' "$TMP/rx.err" | head -n1 | grep -o '[0-9]*$')
    rm -f run.out   # the last run's token must not be read for this one's
    JOINER_GO=$TMP/go "$JOINER" run 127.0.0.1 "$LPORT" stream.bin 3 honest >run.out 2>&1 &
    RPID=$!
    PIDS+=("$RPID")
    token_of run.out
    # the stranger sends its bytes and reads until the receiver is done with it
    timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 9
        printf "plain bytes from a stranger\n" >&3; cat <&3 >/dev/null' stranger "$LPORT" 2>/dev/null
    SRC=$?
    [ "$SRC" -ne 9 ] && [ "$SRC" -ne 124 ] || fail "the plain stranger could not connect, or was never let go"
    ok "the plain stranger was let go"
    touch go
    wait_bounded "$RPID" 30
    [ "$STATUS" -eq 0 ] && grep -q "joined 2" run.out ||
        { cat run.out "$TMP/rx.err"; fail "a plain stranger during the gathering kept the sender's connections out (the fake sender exited $STATUS)"; }
    ok "the sender's connections join after the plain stranger"
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq 0 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS"; }
    same in out "the transfer is whole despite the plain stranger"
fi

done_testing
