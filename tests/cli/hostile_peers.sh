#!/bin/bash
# Purpose: regressions from hostile testing.  A fake receiver that answers
# success before the data, or an answer whose failure code was zeroed on the
# way back, never makes a sender exit 0; a --raw sender to a weir listener is
# told its data was refused; a greeting trickled a byte at a time does not
# stretch --timeout; a refused weir sender is told why; a flood from the
# sender's own address does not keep the sender out; -6 listens on IPv6 only.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 100000 random

# a fake receiver: greets, answers "success, 100000 bytes" at once, closes
nc_fake() {   # nc_fake SCRIPT...: serve what SCRIPT prints to one connection; sets FPORT
    local port
    port=$("$TESTTOOL" freeport)
    { "$@"; sleep 5; } | nc -l 127.0.0.1 "$port" >/dev/null 2>&1 &
    PIDS+=($!)
    "$TESTTOOL" waitlisten "$port" 10 || fail "the fake receiver did not listen"
    FPORT=$port
}
nc_fake sh -c "\"$TESTTOOL\" greet 1 1 R; \"$TESTTOOL\" status 0 100000 ok"
expect 5 "a success answer before the stream ended" "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$FPORT"
# read before the trailer went out, or after: either way it is refused
grep -qE "answered success before the stream ended|answer is for another stream|closed the connection without an answer" "$TMP/err" ||
    { cat "$TMP/err"; fail "early success: no reason given"; }
ok "early success: refused, and says why"

# the receiver's /dev/full failure, with its code zeroed on the way back
listen /dev/null "$TMP/lerr" -q -o /dev/full
rm -f "$TMP/proxy"
"$TESTTOOL" proxy "$LPORT" zerostatus 0 >"$TMP/proxy" &
PIDS+=($!)
wait_for "$TMP/proxy" "proxy listening on" 10
expect 5 "an answer whose failure was turned into success" \
    "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/proxy")"
has_msg "$TMP/err" "checksum mismatch" "the forged answer fails its checksum"
wait_bounded "$LPID" 20

# --raw to a weir listener: the listener refuses plain bytes; the sender knows
listen "$TMP/out" "$TMP/lerr"
expect 5 "--raw sender to a weir listener" "$WEIR" -q --raw -i "$TMP/in" -O "127.0.0.1:$LPORT"
# it sees the listener's greeting, or, when the refusal's reset came first,
# the reset: either way it knows its data did not arrive
grep -qE "the peer is a weir listener|the peer reset the connection" "$TMP/err" ||
    { cat "$TMP/err"; fail "--raw to a weir listener: no reason given"; }
ok "--raw to a weir listener: says why"
kill "$LPID"

# a greeting trickled one byte a second: --timeout 2 bounds all of it
port=$("$TESTTOOL" freeport)
{ for i in $(seq 40); do printf W; sleep 1; done; } | nc -l 127.0.0.1 "$port" >/dev/null 2>&1 &
PIDS+=($!)
"$TESTTOOL" waitlisten "$port" 10 || fail "the trickler did not listen"
"$WEIR" -q --timeout 2 -i "$TMP/in" -O "127.0.0.1:$port" 2>"$TMP/err" &
spid=$!
wait_bounded "$spid" 8
[ "$STATUS" -eq 5 ] || fail "trickled greeting: exit $STATUS, want 5"
has_msg "$TMP/err" "no weir greeting within 2 s" "a trickled greeting fails within --timeout"

# a weir sender refused by the allow-list is told why, not "not weir"
rm -f "$TMP/lerr"   # never read a previous listener's port
"$WEIR" -I 127.0.0.2:0 -o /dev/null 2>"$TMP/lerr" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/lerr" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/lerr" | grep -o '[0-9]*$')
expect 5 "a sender outside the allow-list" "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$port"
has_msg "$TMP/err" "receiver: refused: this receiver admits another address only" \
    "a refused sender is told it is not on the allow-list"
kill "$LPID"

# a flood from the sender's own address (8 open at a time, as fast as it can)
listen "$TMP/out" "$TMP/lerr"
for i in 1 2 3 4; do
    "$TESTTOOL" flood "$LPORT" 4 >/dev/null &
    PIDS+=($!)
done
wait_for "$TMP/lerr" "dropped connection from 127.0.0.1" 10
"$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$LPORT" || fail "the sender inside a flood: exit $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "the listener inside a flood: exit $STATUS"
same "$TMP/in" "$TMP/out" "a flood from the sender's own address does not keep it out"
lines=$(grep -c "connection from 127.0.0.1" "$TMP/lerr")
[ "$lines" -lt 200 ] || fail "the flood wrote $lines log lines"
ok "the refusal log is bounded ($lines lines)"

# the -l file obeys the same bound and the same levels as the terminal: a
# flood of connections and one of junk at a keyed listener, -v and -q
"$WEIR" -q --genkey "$TMP/flood.key" --key-id flood || fail "--genkey"
for opts in "-v" "-q" "-v --key-file $TMP/flood.key"; do
    rm -f "$TMP/flood.log"
    listen "$TMP/out" "$TMP/lerr" -l "$TMP/flood.log" $opts
    floods=()
    for i in 1 2 3 4; do
        "$TESTTOOL" flood "$LPORT" 4 >/dev/null &
        floods+=($!)
    done
    PIDS+=("${floods[@]}")
    "$TESTTOOL" crowd "$LPORT" 50 3000 </dev/null >/dev/null 2>&1 &
    PIDS+=($!)
    sleep_until=$(( $(date +%s) + 5 ))
    until [ "$(date +%s)" -ge "$sleep_until" ]; do
        grep -q "dropped connection from 127.0.0.1" "$TMP/flood.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "dropped connection from 127.0.0.1" "$TMP/flood.log" ||
        fail "a flood ($opts): the -l file has no refusal"
    for f in "${floods[@]}"; do wait_bounded "$f" 20; done   # they end after 4 s
    kill "$LPID"
    wait_bounded "$LPID" 10
    lines=$(wc -l <"$TMP/flood.log")
    # 10 lines a second and one counting line, for at most 6 s, and a few more
    [ "$lines" -le 90 ] || fail "a flood ($opts): the -l file got $lines lines"
    ok "a flood ($opts): the -l file is bounded ($lines lines)"
    if [ "$opts" = "-q" ]; then
        grep -q "waiting for it to prove itself" "$TMP/flood.log" &&
            fail "a flood (-q): debug lines reached the -l file"
        ok "the -l file takes no debug lines without -v"
    fi
done

# -6: IPv6 only
rm -f "$TMP/lerr"   # never read a previous listener's port
"$WEIR" -6 -I 0 -o /dev/null 2>"$TMP/lerr" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/lerr" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/lerr" | grep -o '[0-9]*$')
expect 5 "IPv4 to a -6 listener" "$WEIR" -q --connect-timeout 0 -i "$TMP/in" -O "127.0.0.1:$port"
has_msg "$TMP/err" "Connection refused" "a -6 listener does not take IPv4"
kill "$LPID"
done_testing
