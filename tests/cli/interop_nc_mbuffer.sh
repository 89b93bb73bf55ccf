#!/bin/bash
# Purpose: weir --raw -O feeds nc -l and mbuffer -I; weir -I accepts streams from
# nc and from mbuffer -O.
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

# nc -> weir -I
listen "$TMP/out" "$TMP/lerr" -q
nc -N 127.0.0.1 "$LPORT" <"$TMP/in" || fail "nc exited $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "weir -I from nc exited $STATUS"
same "$TMP/in" "$TMP/out" "weir -I accepts a stream from nc"

# weir --raw -O -> mbuffer -I
port=$("$TESTTOOL" freeport)
mbuffer -q -I "127.0.0.1:$port" -o "$TMP/mb.out" 2>"$TMP/mb.err" &
mbpid=$!
PIDS+=("$mbpid")
"$TESTTOOL" waitlisten "$port" 10 || fail "mbuffer did not listen"
"$WEIR" -q --raw -O "127.0.0.1:$port" -i "$TMP/in" || fail "weir --raw -O to mbuffer exited $?"
wait_bounded "$mbpid" 20
same "$TMP/in" "$TMP/mb.out" "weir --raw -O feeds mbuffer -I"

# mbuffer -O -> weir -I
listen "$TMP/out2" "$TMP/lerr2" -q
mbuffer -q -i "$TMP/in" -O "127.0.0.1:$LPORT" 2>"$TMP/mb2.err" || fail "mbuffer -O exited $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "weir -I from mbuffer exited $STATUS"
same "$TMP/in" "$TMP/out2" "weir -I accepts a stream from mbuffer -O"
done_testing
