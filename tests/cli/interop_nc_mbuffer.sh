#!/bin/bash
# Purpose: weir --raw -O feeds nc -l and mbuffer -I; weir -I --raw accepts streams
# from nc and from mbuffer -O.  Without --raw, weir never writes its framing into
# a peer that is not weir: a sender waits for the greeting and says the peer does
# not seem to be weir, and a listener refuses plain bytes and keeps listening.
. "$(dirname "$0")/lib.sh"
command -v nc >/dev/null || fail "nc is not installed (scripts/deps.sh installs it)"
command -v mbuffer >/dev/null || fail "mbuffer is not installed (scripts/deps.sh installs it)"
gen "$TMP/in" 7000003 mixed

# weir --raw -O -> nc -l
nc -v -l 127.0.0.1 0 >"$TMP/nc.out" 2>"$TMP/nc.err" &
ncpid=$!
PIDS+=("$ncpid")
wait_for "$TMP/nc.err" "Listening on" 10
port=$(grep -o 'Listening on .*' "$TMP/nc.err" | grep -o '[0-9]*$')
"$WEIR" -q --raw -O "127.0.0.1:$port" -i "$TMP/in" || fail "weir --raw -O to nc exited $?"
wait_bounded "$ncpid" 20
same "$TMP/in" "$TMP/nc.out" "weir --raw -O feeds nc -l"

# weir -O (no --raw) -> nc -l: nothing lands in nc's output, the sender says why
nc -v -l 127.0.0.1 0 >"$TMP/nc2.out" 2>"$TMP/nc2.err" &
ncpid=$!
PIDS+=("$ncpid")
wait_for "$TMP/nc2.err" "Listening on" 10
port=$(grep -o 'Listening on .*' "$TMP/nc2.err" | grep -o '[0-9]*$')
expect 5 "weir -O to nc -l" "$WEIR" -q --timeout 2 -O "127.0.0.1:$port" -i "$TMP/in"
has_msg "$TMP/err" "no weir greeting within 2 s: it does not seem to be weir" "weir -O to nc -l: says why"
has_msg "$TMP/err" "weir --raw" "weir -O to nc -l: points at --raw"
wait_bounded "$ncpid" 20
[ -s "$TMP/nc2.out" ] && fail "weir -O wrote $(stat -c %s "$TMP/nc2.out") bytes into nc -l"
ok "weir -O wrote nothing into nc -l"

# weir -z --raw -O -> nc -l: one standard LZ4 frame that lz4 -d reads
nc -v -l 127.0.0.1 0 >"$TMP/ncz.out" 2>"$TMP/ncz.err" &
ncpid=$!
PIDS+=("$ncpid")
wait_for "$TMP/ncz.err" "Listening on" 10
port=$(grep -o 'Listening on .*' "$TMP/ncz.err" | grep -o '[0-9]*$')
"$WEIR" -q -z --raw -O "127.0.0.1:$port" -i "$TMP/in" || fail "weir -z --raw -O to nc exited $?"
wait_bounded "$ncpid" 20
lz4 -dc "$TMP/ncz.out" >"$TMP/ncz.dec" || fail "lz4 -d of what weir -z --raw sent exited $?"
same "$TMP/in" "$TMP/ncz.dec" "weir -z --raw -O sends an LZ4 frame that lz4 -d reads"

# nc -> weir -I --raw
listen "$TMP/out" "$TMP/lerr" -q --raw
nc -N 127.0.0.1 "$LPORT" <"$TMP/in" >"$TMP/nc3.out" || fail "nc exited $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "weir -I --raw from nc exited $STATUS"
same "$TMP/in" "$TMP/out" "weir -I --raw accepts a stream from nc"
[ -s "$TMP/nc3.out" ] && fail "a --raw listener wrote to its peer"
ok "a --raw listener writes nothing to its peer"

# nc -> weir -I (no --raw): refused, logged, nothing written, still listening
listen "$TMP/out4" "$TMP/lerr4"
nc -N 127.0.0.1 "$LPORT" <"$TMP/in" >"$TMP/nc4.out" 2>/dev/null
wait_for "$TMP/lerr4" "refused connection from 127.0.0.1" 10
has_msg "$TMP/lerr4" "it sent plain bytes" "plain bytes to weir -I: the refusal says why"
has_msg "$TMP/lerr4" "weir -I --raw" "plain bytes to weir -I: points at --raw"
kill -0 "$LPID" || fail "the listener stopped after refusing nc"
ok "the listener keeps listening after refusing nc"
[ -s "$TMP/out4" ] && fail "plain bytes reached the output of weir -I"
ok "plain bytes did not reach the output"
# an nc that sends nothing reads the greeting (one that sends data may lose it
# to the reset that closing a refused connection with unread data causes)
nc -N 127.0.0.1 "$LPORT" </dev/null >"$TMP/nc5.out" 2>/dev/null
[ "$(head -c 4 "$TMP/nc5.out" | od -An -tx1 | tr -d ' ')" = "572a4d18" ] ||
    fail "nc did not receive the greeting"
ok "nc sees the greeting (the man page says so)"
grep -qa "it closed without sending anything" "$TMP/nc5.out" ||
    fail "nc was not told why it was dropped"
ok "and the reason it was dropped, in an answer record"
"$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$LPORT" || fail "a weir sender after the refusal: exit $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "weir -I after refusing nc exited $STATUS"
same "$TMP/in" "$TMP/out4" "then the real weir sender gets through"

# weir --raw -O -> mbuffer -I
port=$("$TESTTOOL" freeport)
mbuffer -q -I "127.0.0.1:$port" -o "$TMP/mb.out" 2>"$TMP/mb.err" &
mbpid=$!
PIDS+=("$mbpid")
"$TESTTOOL" waitlisten "$port" 10 || fail "mbuffer did not listen"
"$WEIR" -q --raw -O "127.0.0.1:$port" -i "$TMP/in" || fail "weir --raw -O to mbuffer exited $?"
wait_bounded "$mbpid" 20
same "$TMP/in" "$TMP/mb.out" "weir --raw -O feeds mbuffer -I"

# weir -O (no --raw) -> mbuffer -I: nothing written into mbuffer's output
port=$("$TESTTOOL" freeport)
mbuffer -q -I "127.0.0.1:$port" -o "$TMP/mb3.out" 2>"$TMP/mb3.err" &
mbpid=$!
PIDS+=("$mbpid")
"$TESTTOOL" waitlisten "$port" 10 || fail "mbuffer did not listen"
expect 5 "weir -O to mbuffer -I" "$WEIR" -q --timeout 2 -O "127.0.0.1:$port" -i "$TMP/in"
has_msg "$TMP/err" "it does not seem to be weir" "weir -O to mbuffer: says why"
wait_bounded "$mbpid" 20
[ -s "$TMP/mb3.out" ] && fail "weir -O wrote into mbuffer's output"
ok "weir -O wrote nothing into mbuffer's output"

# mbuffer -O -> weir -I --raw
listen "$TMP/out2" "$TMP/lerr2" -q --raw
mbuffer -q -i "$TMP/in" -O "127.0.0.1:$LPORT" 2>"$TMP/mb2.err" || fail "mbuffer -O exited $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "weir -I --raw from mbuffer exited $STATUS"
same "$TMP/in" "$TMP/out2" "weir -I --raw accepts a stream from mbuffer -O"
done_testing
