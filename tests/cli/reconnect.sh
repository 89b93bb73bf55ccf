#!/bin/bash
# Purpose: a connection between two weirs that breaks (a reset, a cut, a
# black hole) is made again and the stream resumes where the receiver
# stopped: nothing lost, nothing written twice, both ends exit 0 and count
# the reconnections.  A gap longer than --reconnect, a receiver that is
# gone, a stranger in the gap and a sender killed in the gap all end as they
# should.  The fault proxy (testtool cutproxy) cuts a series of connections.
. "$(dirname "$0")/lib.sh"
SIZE=$(sized 200000000 24000000)
gen "$TMP/in" "$SIZE" mixed
KEY=$TMP/key
"$WEIR" -q --genkey "$KEY" --key-id t || fail "--genkey"


# send_both_ok LABEL INPUT [SENDER-OPTIONS...]: send INPUT through the
# proxy to the receiver listening on LPORT; both must exit 0
send_both_ok() {
    local label=$1 input=$2
    shift 2
    if [ -n "${FROM_PIPE:-}" ]; then
        # a pipe cannot be read again: what the receiver lacks is held
        cat "$input" | "$WEIR" "$@" -O "127.0.0.1:$PPORT" 2>"$TMP/serr"
    else
        "$WEIR" "$@" -i "$input" -O "127.0.0.1:$PPORT" 2>"$TMP/serr"
    fi
    local sst=$?
    wait_bounded "$LPID" 60
    [ "$sst" -eq 0 ] && [ "$STATUS" -eq 0 ] ||
        { cat "$TMP/serr" "$TMP/lerr"; fail "$label: sender exit $sst, receiver exit $STATUS"; }
    ok "$label: both exit 0"
}

# resume LABEL CUTS EVERY MODE SENDER-OPTIONS... -- RECEIVER-OPTIONS...:
# sender -> cut proxy -> receiver; both must exit 0 with the data whole and
# CUTS reconnections in both summaries.  The input is $TMP/in, or RESUME_IN
resume() {
    local label=$1 cuts=$2 every=$3 mode=$4
    shift 4
    local sopts=() ropts=()
    split_options "$@"
    sopts=("${SOPTS[@]}") ropts=("${ROPTS[@]}")
    rm -f "$TMP/out"
    listen "$TMP/rout" "$TMP/lerr" --reconnect 60 "${ropts[@]}"
    cut_proxy "$LPORT" "$cuts" "$every" "$mode"
    local input=${RESUME_IN:-$TMP/in}
    send_both_ok "$label" "$input" --reconnect 60 "${sopts[@]}"
    local n
    n=$(grep -c '^cut ' "$TMP/proxy")
    [ "$n" -eq "$cuts" ] || fail "$label: the proxy cut $n times, not $cuts"
    [ -e "$TMP/out" ] || cp "$TMP/rout" "$TMP/out"
    same "$input" "$TMP/out" "$label: whole and in order after $cuts cuts"
    local word=reconnections
    [ "$cuts" -eq 1 ] && word=reconnection
    has_msg "$TMP/serr" "$cuts $word" "$label: the sender's summary counts them"
    has_msg "$TMP/lerr" "$cuts $word" "$label: the receiver's summary counts them"
    kill "$PPID_" 2>/dev/null
}

every=$((SIZE / 6))
resume "reset once" 1 $((SIZE / 2)) reset -- -o "$TMP/out"
resume "reset 5 times" 5 "$every" reset -- -o "$TMP/out"
resume "cut 5 times" 5 "$every" cut -- -o "$TMP/out"
resume "-z, reset once" 1 $((SIZE / 3)) reset -z -- -o "$TMP/out"
resume "-z, cut 5 times" 5 $((every / 4)) cut -z -- -o "$TMP/out"
resume "a key, reset 5 times" 5 "$every" reset --key-file "$KEY" -- --key-file "$KEY" -o "$TMP/out"
resume "a key and -z, cut once" 1 $((SIZE / 4)) cut -z --key-file "$KEY" -- \
    --key-file "$KEY" -o "$TMP/out"
# -R cuts blocks in bursts (rate / 20), a sealed stream in whole blocks: a
# block resent after a break in its middle must be cut as it was the first
# time, not by the other rule (code review: both exited 6, "block frame
# holds more than one block")
head -c 12000017 "$TMP/in" >"$TMP/in12"
RESUME_IN=$TMP/in12 resume "a key and -R 10M, reset inside a block" 1 5000000 reset \
    --key-file "$KEY" -R 10M -- --key-file "$KEY" -o "$TMP/out"
RESUME_IN=$TMP/in12 resume "-R 10M, reset inside a block" 1 5000000 reset -R 10M -- -o "$TMP/out"
resume "a key, one worker, reset 5 times" 5 "$every" reset -T 1 --key-file "$KEY" -- \
    --key-file "$KEY" -o "$TMP/out"
resume "a consumer, reset 5 times" 5 "$every" reset -- -- sh -c "cat >'$TMP/out'"
resume "-z and a key into a consumer, cut 5 times" 5 $((every / 4)) cut -z --key-file "$KEY" \
    -- --key-file "$KEY" -- sh -c "cat >'$TMP/out'"
# a regular file is read again for what the receiver lacks, a pipe's
# bytes are held in the buffer: the same cuts from a pipe
FROM_PIPE=1 resume "from a pipe, reset 5 times" 5 "$every" reset -- -o "$TMP/out"
FROM_PIPE=1 resume "from a pipe, -s 4k -m 8M, cut 5 times" 5 $((SIZE / 37)) cut -s 4k -m 8M -- \
    -o "$TMP/out"
# cuts 1 MB into every connection: each comes while the records the last
# one lost are read again and sent, so that is cut short and taken up again
resume "reset 8 times, 1 MB into each connection" 8 1000000 reset -- -o "$TMP/out"
has_msg "$TMP/serr" "bytes of input $TMP/in again to send them" \
    "reset 8 times: what the receiver lacked was read again from the file"
FROM_PIPE=1 resume "from a pipe, reset 8 times, 1 MB into each connection" 8 1000000 reset -- \
    -o "$TMP/out"
# the stream's first bytes: inside the header (greeting 32, header 24) and the first record
resume "cut inside the first record" 1 100 reset -- -o "$TMP/out"
resume "cut right after the first byte of data" 1 57 cut -s 4k -- -o "$TMP/out"
# small blocks, a small buffer: thousands of records between confirmations
resume "-s 4k -m 8M, reset 5 times" 5 $((SIZE / 37)) reset -s 4k -m 8M -- -o "$TMP/out"

# idle_breaks LABEL EVERY SENDER-OPTIONS... -- RECEIVER-OPTIONS...: a
# producer that pauses with every byte so far confirmed; the connection
# breaks in the pause once EVERY bytes of the receiver's reached the
# sender, and so does the connection that resumed it, before anything more
# was sent.  The note of where to resume must outlive the first resume (it
# was dropped until sent again: exit 5, "not between the N it confirmed and
# the N sent")
idle_breaks() {
    local label=$1 every=$2 sopts=() ropts=()
    shift 2
    split_options "$@"
    sopts=("${SOPTS[@]}") ropts=("${ROPTS[@]}")
    head -c 2000017 "$TMP/in" >"$TMP/in2"
    listen "$TMP/out" "$TMP/lerr" --reconnect 60 "${ropts[@]}"
    cut_proxy "$LPORT" 2 "$every" reset 0 --down
    (head -c 1000000 "$TMP/in2"; wait_for "$TMP/proxy" "cut 2 at" 30
     tail -c +1000001 "$TMP/in2") |
        "$WEIR" --reconnect 60 "${sopts[@]}" -O "127.0.0.1:$PPORT" 2>"$TMP/serr"
    local sst=$?
    wait_bounded "$LPID" 60
    [ "$sst" -eq 0 ] && [ "$STATUS" -eq 0 ] ||
        { cat "$TMP/proxy" "$TMP/serr" "$TMP/lerr"; fail "$label: sender exit $sst, receiver exit $STATUS"; }
    same "$TMP/in2" "$TMP/out" "$label: both exit 0, whole"
    has_msg "$TMP/serr" "2 reconnections" "$label: the sender counts both breaks"
    kill "$PPID_" 2>/dev/null
}
idle_breaks "two breaks in a pause of the producer" 150
idle_breaks "-z, two breaks in a pause of the producer" 150 -z
idle_breaks "a key, two breaks in a pause of the producer" 600 --key-file "$KEY" -- \
    --key-file "$KEY"
# a buffer under 8 MiB (twice the receiver's confirmation interval) or 4
# blocks would wait on every confirmation: such a sender does not offer
# resuming, and a break fails as before
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 1 -o "$TMP/out"
cut_proxy "$LPORT" 1 $((SIZE / 4)) reset
expect 5 "a sender with a 4 MiB buffer does not resume" \
    "$WEIR" -s 64k -m 4M -i "$TMP/in" -O "127.0.0.1:$PPORT"
has_msg "$TMP/err" "a break will not be resumed: the buffer (4096 KiB, 64 blocks) is under the 8 MiB" \
    "a sender that cannot resume says so before it sends"
wait_bounded "$LPID" 30
[ "$STATUS" -ne 0 ] || fail "the receiver of a sender that cannot resume exited 0"
kill "$PPID_" 2>/dev/null

# a cut before the sender heard the session's name (the first round trip)
# cannot resume: the sender fails at once, the receiver after --reconnect
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 1 -o "$TMP/out"
cut_proxy "$LPORT" 1 56 cut
expect 5 "a cut before the session was named: the sender" \
    "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$PPORT"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 5 ] || { cat "$TMP/lerr"; fail "a cut before the session was named: receiver $STATUS"; }
ok "a cut before the session was named: the receiver exits 5 after --reconnect"
kill "$PPID_" 2>/dev/null

# the receiver's confirmations lost just before each cut: the sender holds
# more than the receiver needs, and resumes where the receiver says, so no
# byte is written twice
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -o "$TMP/out"
cut_proxy "$LPORT" 3 "$every" reset 0 --mute-back $((SIZE / 20))
send_both_ok "confirmations lost" "$TMP/in"
same "$TMP/in" "$TMP/out" "confirmations lost before 3 cuts: nothing written twice"
kill "$PPID_" 2>/dev/null

# a cut while the sender waits on a full buffer (a receiver slower than the input)
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -R 40M -o "$TMP/out"
cut_proxy "$LPORT" 2 $((SIZE / 8)) reset
send_both_ok "full buffer" "$TMP/in" -m 8M -s 64k
has_msg "$TMP/serr" "2 reconnections" "cut twice while the sender's 8 MiB buffer was full"
same "$TMP/in" "$TMP/out" "cut while the buffer was full: whole"

# the connection reset once the whole stream is in (the proxy cuts as the
# sender's trailer passes), while the receiver's consumer
# still works: the answer cannot go back on it, so the sender comes back
# for it, and both exit 0
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -- sh -c "sleep 1; cat >'$TMP/out'"
cut_proxy "$LPORT" 1 0 reset --at-trailer
send_both_ok "cut after the trailer, before the answer" "$TMP/in" --reconnect 60
same "$TMP/in" "$TMP/out" "cut after the trailer: whole"
grep -qE "the sender came back(; it has the answer once the outputs are done| for the answer)" \
    "$TMP/lerr" || { cat "$TMP/lerr" >&2; fail "cut after the trailer: the answer did not go home"; }
ok "cut after the trailer: the sender is taken back for the answer"
kill "$PPID_" 2>/dev/null

# a black hole once the whole stream is in: an answer written into the
# connection is swallowed, and so is the sender's word that it read one.
# The receiver waits for that word; the sender, hearing nothing for its
# --timeout (3 s, shorter than the 10 s it waits otherwise), knocks again,
# is taken back and given the answer, and both exit 0 (before, the
# receiver took the silence for delivery and left: sender exit 5)
gen "$TMP/small" 3000000 random
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -o "$TMP/out"
cut_proxy "$LPORT" 1 0 silent --at-trailer
send_both_ok "a black hole after the trailer" "$TMP/small" --reconnect 60 --timeout 3
has_msg "$TMP/lerr" "the sender has not said that it read the answer" \
    "a black hole after the trailer: the receiver does not take silence for the sender's word"
has_msg "$TMP/lerr" "the sender came back for the answer" \
    "a black hole after the trailer: the answer goes home"
has_msg "$TMP/serr" "1 reconnection" "a black hole after the trailer: the sender counts its reconnection"
same "$TMP/small" "$TMP/out" "a black hole after the trailer: whole"
kill "$PPID_" 2>/dev/null

# the producer fails while the connection is down (the proxy holds off
# new connections for 8 s): no abort record can go, so the receiver fails
# only once its --reconnect (2 s) has passed (a known limit, faults row
# 273); the sender names the producer and says the receiver was not told
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 2 -o "$TMP/out"
cut_proxy "$LPORT" 1 1000000 reset 8
expect 3 "a producer that fails during a break" "$WEIR" --reconnect 30 -O "127.0.0.1:$PPORT" \
    -- sh -c "head -c 3000000 '$TMP/small'; sleep 2; exit 1"
has_msg "$TMP/err" "exited with status 1" "a producer that fails during a break: named"
has_msg "$TMP/err" "the stream stopped during a break: the receiver cannot be told" \
    "a producer that fails during a break: the sender says the receiver was not told"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 5 ] || { cat "$TMP/lerr"; fail "a producer that fails during a break: receiver exit $STATUS"; }
has_msg "$TMP/lerr" "the sender did not come back within 2 s" "...: the receiver gives up after its window"
kill "$PPID_" 2>/dev/null

# a black hole before the receiver named the session (1 byte of the
# sender's passes): no break this early can be resumed, and the sender says
# that, not a bare "Connection timed out"; its --timeout (3 s) bounds the
# wait for the name
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -o "$TMP/out"
cut_proxy "$LPORT" 1 1 silent
expect 5 "a black hole before the session is named" \
    "$WEIR" --reconnect 60 --timeout 3 -i "$TMP/small" -O "127.0.0.1:$PPORT"
has_msg "$TMP/err" "the receiver did not name the session within 3 s of the stream's header (a break this early cannot be resumed)" \
    "a black hole before the session is named: said so"
kill "$LPID" "$PPID_" 2>/dev/null

# the same cut with a sender whose --reconnect (1 s) is shorter than the
# consumer's drain (a zfs recv committing): the receiver takes the sender
# back at once, not once its consumer is done, tells it the whole stream is
# held and keeps it informed until the answer (before: receiver 0, sender 5
# "all of it, but its answer was lost")
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -- sh -c "sleep 4; cat >'$TMP/out'"
cut_proxy "$LPORT" 1 0 reset --at-trailer
send_both_ok "cut after the trailer, a sender's window shorter than the drain" "$TMP/small" \
    --reconnect 1
has_msg "$TMP/lerr" "the sender came back; it has the answer once the outputs are done" \
    "a short window: the receiver takes the sender back while its consumer drains"
has_msg "$TMP/serr" "1 reconnection" "a short window: the sender counts its reconnection"
same "$TMP/small" "$TMP/out" "a short window: whole"
kill "$PPID_" 2>/dev/null

# a black hole: the proxy stops relaying but keeps both sockets open.  The
# sender hears no keepalive for its --timeout (3 s) and reconnects; the
# receiver, which heard nothing for its own (5 s) with its sender knocking
# again, lets the old connection go
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 --timeout 5 -o "$TMP/out"
cut_proxy "$LPORT" 1 1000000 silent
send_both_ok "a black hole" "$TMP/small" --timeout 3
has_msg "$TMP/serr" "1 reconnection" "a black hole: the sender reconnects"
has_msg "$TMP/serr" "the receiver said nothing for 3 s" "a black hole: the sender's --timeout bounds the silence"
has_msg "$TMP/lerr" "it said nothing for 5 s, and a new connection is waiting" \
    "a black hole: the receiver lets the silent one go"
same "$TMP/small" "$TMP/out" "a black hole: whole"
kill "$PPID_" 2>/dev/null

# the same black hole swallowing the end of the stream, with a sender
# whose --timeout (3 s) is shorter than the 10 s its back channel waits:
# the silence before the answer is a break too, not a failure (it used to
# exit 5, "the receiver fell silent for 3 s before it answered", and leave
# the receiver waiting out --reconnect)
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 --timeout 5 -o "$TMP/out"
cut_proxy "$LPORT" 1 1000000 silent
send_both_ok "a black hole at the end, --timeout 3" "$TMP/small" --timeout 3
has_msg "$TMP/serr" "the receiver said nothing for 3 s after the stream's end" \
    "a black hole at the end, --timeout 3: the sender takes the silence for a break"
has_msg "$TMP/serr" "1 reconnection" "a black hole at the end, --timeout 3: the sender reconnects"
same "$TMP/small" "$TMP/out" "a black hole at the end, --timeout 3: whole"
kill "$PPID_" 2>/dev/null

# a gap longer than --reconnect fails both ends, each saying so
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 1 -o "$TMP/out"
cut_proxy "$LPORT" 1 $((SIZE / 4)) reset 5
"$WEIR" --reconnect 1 -i "$TMP/in" -O "127.0.0.1:$PPORT" 2>"$TMP/serr"
sst=$?
wait_bounded "$LPID" 30
[ "$sst" -eq 5 ] || { cat "$TMP/serr"; fail "a long gap: sender exit $sst, want 5"; }
has_msg "$TMP/serr" "no new one could be made within 1 s" "a gap longer than --reconnect: the sender exits 5"
[ "$STATUS" -eq 5 ] || { cat "$TMP/lerr"; fail "a long gap: receiver exit $STATUS, want 5"; }
has_msg "$TMP/lerr" "the sender did not come back within 1 s" \
    "a gap longer than --reconnect: the receiver exits 5"
kill "$PPID_" 2>/dev/null

# a receiver that is gone (nothing listens where it was) ends the wait at once
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -o "$TMP/out"
cut_proxy "$LPORT" 1 $((SIZE / 4)) reset 0 --refuse-after 1
start=$(date +%s)
"$WEIR" --reconnect 60 -i "$TMP/in" -O "127.0.0.1:$PPORT" 2>"$TMP/serr"
sst=$?
took=$(($(date +%s) - start))
[ "$sst" -eq 5 ] || { cat "$TMP/serr"; fail "a refused reconnection: sender exit $sst"; }
has_msg "$TMP/serr" "the receiver refuses a new one: it is gone" \
    "a refused reconnection: the sender exits 5 saying the receiver is gone"
[ "$took" -lt 30 ] || fail "a refused reconnection: the sender waited $took s"
ok "a refused reconnection ends the wait at once ($took s)"
kill "$LPID" 2>/dev/null
wait "$LPID" 2>/dev/null

# a stranger in the gap is refused, and the real sender resumes
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -o "$TMP/out"
cut_proxy "$LPORT" 1 $((SIZE / 3)) reset 3
bg "$WEIR" -i "$TMP/in" -O "127.0.0.1:$PPORT"
spid=$BPID
wait_for "$TMP/proxy" "cut 1" 30
wait_for "$TMP/lerr" "waiting up to 60 s for the sender" 10
expect 5 "a stranger in the gap" "$WEIR" -q -i "$TMP/small" -O "127.0.0.1:$LPORT"
has_msg "$TMP/err" "a transfer is under way here" "the stranger is told why"
has_msg "$TMP/lerr" "a transfer is under way here" "the receiver logs the stranger it refused"
wait_bounded "$spid" 60
[ "$STATUS" -eq 0 ] || fail "the real sender after a stranger: exit $STATUS"
wait_bounded "$LPID" 60
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "the receiver after a stranger: exit $STATUS"; }
same "$TMP/in" "$TMP/out" "the real sender resumed past the stranger"
kill "$PPID_" 2>/dev/null

# the sender killed in the gap: the receiver gives up after --reconnect,
# and its consumer is stopped as for a truncated stream
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 2 -- sh -c "cat >'$TMP/out'"
cut_proxy "$LPORT" 1 $((SIZE / 3)) reset 30
bg "$WEIR" -i "$TMP/in" -O "127.0.0.1:$PPORT"
spid=$BPID
wait_for "$TMP/proxy" "cut 1" 30
kill -9 "$spid"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 5 ] || { cat "$TMP/lerr"; fail "a sender killed in the gap: receiver exit $STATUS"; }
has_msg "$TMP/lerr" "the sender did not come back within 2 s" \
    "a sender killed in the gap: the receiver exits 5 after --reconnect"
kill "$PPID_" 2>/dev/null

# the port stays open for the sender's return, but while the transfer runs
# anyone else is refused at once, as by a closed port: a second weir sender
# (and weir as mbuffer, which would otherwise send plain bytes into the
# backlog and take the silence for success)
# (a small buffer and a slow output keep the receiver reading for ~4 s)
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -m 4M -R $((SIZE / 4)) -o "$TMP/out"
bg "$WEIR" -i "$TMP/in" -O "127.0.0.1:$LPORT"
spid=$BPID
wait_size "$TMP/out" 1000000 20
expect 5 "a second sender while a transfer runs" "$WEIR" -q -i "$TMP/small" -O "127.0.0.1:$LPORT"
has_msg "$TMP/err" "busy: a transfer is under way here" "the second sender is told the receiver is busy"
ln -sf "$WEIR" "$TMP/mbuffer"
expect 5 "weir as mbuffer, second while a transfer runs" "$TMP/mbuffer" -q -i "$TMP/small" \
    -O "127.0.0.1:$LPORT"
wait_bounded "$spid" 60
[ "$STATUS" -eq 0 ] || fail "the first sender, with others refused meanwhile: exit $STATUS"
wait_bounded "$LPID" 60
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "the busy receiver: exit $STATUS"; }
same "$TMP/in" "$TMP/out" "the first transfer is whole with others refused meanwhile"
has_msg "$TMP/lerr" "refused connection from 127.0.0.1" "the busy receiver logs whom it refused"

# a receiver restarted in the gap has no such session: it refuses the
# sender's return, and the sender's wait ends at once
port=$("$TESTTOOL" freeport)
rm -f "$TMP/out" "$TMP/lerr"
"$WEIR" -I "$port" --reconnect 60 -o "$TMP/out" 2>"$TMP/lerr" &
lp=$!
PIDS+=("$lp")
wait_for "$TMP/lerr" "listening on" 10
cut_proxy "$port" 1 $((SIZE / 4)) reset 3
"$WEIR" -i "$TMP/in" -O "127.0.0.1:$PPORT" 2>"$TMP/serr" &
spid=$!
PIDS+=("$spid")
wait_for "$TMP/proxy" "cut 1" 30
kill -9 "$lp"
wait "$lp" 2>/dev/null
rm -f "$TMP/out2" "$TMP/l2err"
"$WEIR" -I "$port" -o "$TMP/out2" 2>"$TMP/l2err" &
lp=$!
PIDS+=("$lp")
wait_for "$TMP/l2err" "listening on" 10
wait_bounded "$spid" 30
[ "$STATUS" -eq 5 ] || { cat "$TMP/serr"; fail "a restarted receiver: sender exit $STATUS"; }
has_msg "$TMP/serr" "the session could not resume" "a restarted receiver: the sender exits 5 at once"
has_msg "$TMP/l2err" "it asked to resume a transfer this listener does not have" \
    "a restarted receiver refuses a sender that asks to resume"
kill "$lp" "$PPID_" 2>/dev/null

# --reconnect 0 on either end: a break fails the transfer as it always did
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" -o "$TMP/out"
cut_proxy "$LPORT" 1 $((SIZE / 4)) reset
"$WEIR" --reconnect 0 -i "$TMP/in" -O "127.0.0.1:$PPORT" 2>"$TMP/serr"
sst=$?
wait_bounded "$LPID" 30
[ "$sst" -ne 0 ] && [ "$STATUS" -ne 0 ] || fail "--reconnect 0: sender $sst, receiver $STATUS"
ok "a sender with --reconnect 0 does not resume: both fail (sender $sst, receiver $STATUS)"
kill "$PPID_" 2>/dev/null

# two receivers, each behind its own proxy: each connection resumes on its own
listen "$TMP/r1" "$TMP/l1" --reconnect 60 -o "$TMP/o1"
p1=$LPID port1=$LPORT
listen "$TMP/r2" "$TMP/l2" --reconnect 60 -o "$TMP/o2"
p2=$LPID port2=$LPORT
cut_proxy "$port1" 2 "$every" reset
pp1=$PPORT
cut_proxy "$port2" 3 "$every" cut
pp2=$PPORT
"$WEIR" -i "$TMP/in" -O "127.0.0.1:$pp1" -O "127.0.0.1:$pp2" 2>"$TMP/serr" ||
    { cat "$TMP/serr"; fail "two receivers: sender"; }
has_msg "$TMP/serr" "5 reconnections" "two connections: the sender counts both's"
wait_bounded "$p1" 30
[ "$STATUS" -eq 0 ] || fail "two receivers: the first exits $STATUS"
wait_bounded "$p2" 30
[ "$STATUS" -eq 0 ] || fail "two receivers: the second exits $STATUS"
same "$TMP/in" "$TMP/o1" "two receivers: the first is whole after 2 cuts"
same "$TMP/in" "$TMP/o2" "two receivers: the second is whole after 3 cuts"

# --progress=json counts them
rm -f "$TMP/out"
listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -o "$TMP/out"
cut_proxy "$LPORT" 2 "$every" reset
"$WEIR" -q --progress=json=3 -i "$TMP/in" -O "127.0.0.1:$PPORT" 3>"$TMP/p.jsonl" 2>"$TMP/serr" ||
    fail "json: sender"
wait_bounded "$LPID" 30
tail -n 1 "$TMP/p.jsonl" | grep -q '"reconnections":2,"reconnecting":false' ||
    { tail -n 1 "$TMP/p.jsonl"; fail "json: the end line does not count 2 reconnections"; }
ok "--progress=json: the end line counts the reconnections"
# a sparse file: its holes are sent again as holes, its --sparse zeros
# as they were, and checked to be zeros still
truncate -s 0 "$TMP/sp"
for at in 0 7 19 20 33; do
    head -c 1500000 "$TMP/in" | dd of="$TMP/sp" bs=1M seek="$at" conv=notrunc status=none
done
truncate -s 48M "$TMP/sp"
for extra in "" --sparse; do
    rm -f "$TMP/out"
    listen "$TMP/rout" "$TMP/lerr" --reconnect 60 -o "$TMP/out"
    cut_proxy "$LPORT" 4 3000000 reset
    send_both_ok "a sparse file${extra:+, $extra}, reset 4 times" "$TMP/sp" -v $extra
    same "$TMP/sp" "$TMP/out" "a sparse file${extra:+, $extra}: whole after 4 resets"
    kill "$PPID_" 2>/dev/null
done

# the file changed after it was sent and before the receiver had it: it
# cannot be sent again as it was, so the stream fails on both ends rather
# than deliver what the file never held at one time
# changed LABEL FILE PAST CHANGE MESSAGE: send FILE into a black hole (from
# byte 1000000), run CHANGE once the sender is past byte PAST of it; both
# ends must fail with 3 and MESSAGE
changed() {
    local label=$1 file=$2 past=$3 change=$4 msg=$5
    rm -f "$TMP/out"
    listen "$TMP/rout" "$TMP/lerr" --reconnect 60 --timeout 5 -o "$TMP/out"
    cut_proxy "$LPORT" 1 1000000 silent
    "$WEIR" -q --timeout 3 --progress=json=3 -i "$file" -O "127.0.0.1:$PPORT" 3>"$TMP/p.jsonl" \
        2>"$TMP/serr" &
    local spid=$! out=0
    PIDS+=("$spid")
    for _ in $(seq 200); do   # until the sender is past it (into the black hole)
        out=$(tail -n 1 "$TMP/p.jsonl" 2>/dev/null | grep -o '"out":[0-9]*' | cut -d: -f2)
        [ "${out:-0}" -gt "$past" ] && break
        sleep 0.05
    done
    [ "${out:-0}" -gt "$past" ] || fail "$label: the sender did not get past byte $past"
    eval "$change"
    wait_bounded "$spid" 40
    [ "$STATUS" -eq 3 ] || { cat "$TMP/serr"; fail "$label: sender exit $STATUS, want 3"; }
    has_msg "$TMP/serr" "input $file: $msg" "$label: the sender says what changed"
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq 3 ] || { cat "$TMP/lerr"; fail "$label: receiver exit $STATUS, want 3"; }
    has_msg "$TMP/lerr" "weir: sender: input $file: $msg" \
        "$label: the receiver fails with the sender's reason"
    kill "$PPID_" 2>/dev/null
}
gen "$TMP/chg" 30000000 random
changed "a changed file" "$TMP/chg" 3000000 \
    'printf XXXX | dd of="$TMP/chg" bs=1 seek=1500000 conv=notrunc status=none' \
    "changed since it was sent (bytes 1048576 to 2097152)"
gen "$TMP/chg" 30000000 random
changed "a file cut short" "$TMP/chg" 3000000 'truncate -s 1200000 "$TMP/chg"' \
    "shorter than when it was sent"
# $TMP/sp holds data at 0, 7, 19, 20 and 33 MiB, 1.5 MB each; "out" counts
# data only, so past 1600000 is past the hole at 3000000
cp --sparse=always "$TMP/sp" "$TMP/sp2"
changed "data written into a hole" "$TMP/sp2" 1600000 \
    'printf XXXX | dd of="$TMP/sp2" bs=1 seek=3000000 conv=notrunc status=none' \
    "changed since it was sent (byte 3000000, a hole then)"
done_testing
