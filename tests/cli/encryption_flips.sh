#!/bin/bash
# Purpose: a flipped bit anywhere in an encrypted session (the greeting, the
# handshake, any sealed record) is rejected: the sender never exits 0, the
# receiver never exits 0 nor writes a byte.  Every byte of a short session is
# flipped in turn by the fault proxy (every 7th under the sanitizers and on
# the POSIX build).  The receivers do not wait for a sender to come back
# (--reconnect 0): the single-connection proxy could not let it.
. "$(dirname "$0")/lib.sh"
KEY=$TMP/a.key
"$WEIR" -q --genkey "$KEY" --key-id alpha || fail "--genkey"
gen "$TMP/one" 1 random

# the length of a whole session, from a recording (with --reconnect 0, as
# every flipped session below)
listen "$TMP/out" "$TMP/lerr" --key-file "$KEY" --reconnect 0
"$TESTTOOL" proxy "$LPORT" record 0 0 "$TMP/session" >"$TMP/proxy" &
PIDS+=($!)
wait_for "$TMP/proxy" "proxy listening on" 10
"$WEIR" -q --key-file "$KEY" -i "$TMP/one" -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/proxy")" ||
    fail "the clean session failed"
wait_bounded "$LPID" 20
same "$TMP/one" "$TMP/out" "the clean session"
len=$(stat -c %s "$TMP/session")
[ "$len" -gt 300 ] || fail "a session of only $len bytes"
ok "a session is $len bytes from the sender"

# flip_one AT: one session with byte AT flipped; writes "AT sender receiver bytes"
flip_one() {
    local at=$1 d=$TMP/f$1
    mkdir -p "$d"
    rm -f "$d/lerr"   # never read a previous listener's port
    "$WEIR" -I 0 --timeout 2 --reconnect 0 --key-file "$KEY" -o "$d/out" 2>"$d/lerr" &
    local l=$! i
    for i in $(seq 200); do grep -q "listening on" "$d/lerr" && break; sleep 0.02; done
    local port
    port=$(grep -o 'listening on .*' "$d/lerr" | grep -o '[0-9]*$')
    "$TESTTOOL" proxy "$port" flip "$at" >"$d/proxy" &
    local px=$!
    for i in $(seq 200); do grep -q "proxy listening" "$d/proxy" && break; sleep 0.02; done
    timeout 20 "$WEIR" -q --timeout 2 --key-file "$KEY" -i "$TMP/one" \
        -O "127.0.0.1:$(grep -o '[0-9]*$' "$d/proxy")" 2>"$d/serr"
    local sst=$? rst
    # a refused connection leaves the listener listening: no need to wait
    for i in $(seq 60); do
        kill -0 "$l" 2>/dev/null || break
        grep -q "refused connection\|dropped connection" "$d/lerr" && break
        sleep 0.05
    done
    if kill -0 "$l" 2>/dev/null; then
        kill "$l"; wait "$l"; rst=listening
    else
        wait "$l"; rst=$?
    fi
    kill "$px" 2>/dev/null; wait "$px" 2>/dev/null
    echo "$at $sst $rst $(stat -c %s "$d/out" 2>/dev/null || echo 0)" >>"$TMP/results"
    rm -rf "$d"
}
# every byte on the release build; every 7th under the sanitizers and on
# the POSIX build, whose crypto and framing are the release build's own
# (only the os seam differs, and one session in seven crosses it as well)
step=$(sized 1 7)
[ "${WEIR_PLATFORM:-linux}" = linux ] || step=7
: >"$TMP/results"
# eight sessions at a time, a new one as soon as any ends (a flip that
# leaves one end waiting out --timeout holds only its own place)
running=0
for ((at = 0; at < len; at += step)); do
    if [ "$running" -ge 8 ]; then
        wait -n
        running=$((running - 1))
    fi
    flip_one "$at" &
    running=$((running + 1))
done
wait
runs=$(wc -l <"$TMP/results")
[ "$runs" -ge $(( len / step )) ] || fail "only $runs of the flipped sessions ran"
# (a flip in the trailer's record comes after the data record was written
# and is then an integrity failure, exit 6, as in clear; before that record
# nothing may be written at all)
awk '$2 == 0 { print "byte " $1 ": the sender exited 0" }
     $3 == "0" { print "byte " $1 ": the receiver exited 0" }
     $4 != 0 && $3 != 6 { print "byte " $1 ": " $4 " bytes reached the output, exit " $3 }' \
    "$TMP/results" >"$TMP/bad"
[ -s "$TMP/bad" ] && { head "$TMP/bad"; fail "$(wc -l <"$TMP/bad") flipped bytes were not rejected"; }
ok "all $runs sessions with a flipped byte were rejected by both ends"
# and a flip in the data is an integrity failure on both ends (6), as in clear
awk '$3 == 6' "$TMP/results" | grep -q . || fail "no flip was reported as corrupt data (6)"
ok "flips in sealed records end with exit 6 on the receiver"
# the other way: the receiver's records (keepalives, confirmations) lose
# some on the way (the cut proxy drops what the receiver sends from 100 kB
# of the sender's on).  The next one that arrives does not open: the sender
# fails as for a corrupt stream (6, saying so; it said only "Bad message",
# exit 5), and never 0
gen "$TMP/two" 2000000 random
listen "$TMP/out2" "$TMP/lerr" --key-file "$KEY" --reconnect 0
cut_proxy "$LPORT" 1 3M cut 0 --mute-back 2900000
expect 6 "the receiver's records dropped on the way" \
    "$WEIR" -q --key-file "$KEY" -r 2M -i "$TMP/two" -O "127.0.0.1:$PPORT"
has_msg "$TMP/err" "an encrypted record from the receiver does not open" \
    "the receiver's records dropped: said as such"
wait_bounded "$LPID" 30

done_testing
