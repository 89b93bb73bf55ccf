#!/bin/bash
# streams_grow.sh - --streams auto: a spread transfer that takes more
# connections while it runs.  On loopback it stays on one connection.  A
# long, window-limited path is made up on loopback by the fault shim
# (tcp_long: TCP_INFO says 50 ms, and that the peer's window limited the
# connection all the time); the sender's -r then caps the total, so
# a doubling soon raises nothing and the growth ends.  Each
# transfer ends in a comparison of what arrived; a cut after the growth
# (resumed, and without --reconnect), a receiver that takes one
# connection, a stranger and another key knocking while it grows, and
# SIGTERM to the sender while it grows; a probe whose connections leave
# the transfer while it runs.  Network on loopback, port 0.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1

KEY=$TMP/k.key
OTHER=$TMP/other.key
"$WEIR" --genkey "$KEY" --key-id alpha 2>/dev/null || fail "--genkey"
"$WEIR" --genkey "$OTHER" --key-id beta 2>/dev/null || fail "--genkey"
long_path 50

# loopback: auto stays on one connection, as before
gen in 4194319 random
listen rx.out rx.err -f -o out
expect 0 "auto on loopback" "$WEIR" -v -i in -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat rx.err; fail "the receiver exited $STATUS"; }
same in out "auto on loopback: what arrived is what was sent"
grep -q "one connection at first\|over [0-9]* connections" "$TMP/err" rx.err &&
    { cat "$TMP/err" rx.err; fail "auto spread a transfer on loopback"; }
ok "auto keeps a loopback transfer on one connection, unspread"

on_linux "TCP_INFO made up by the fault shim" || done_testing

# grown TXERR RXERR: the transfer grew to N connections (N >= 2, set),
# and both ends say so
grown() {
    N=$(grep -o "^summary: .* over [0-9]* connections" "$1" | grep -o '[0-9]* connections' |
        grep -o '[0-9]*')
    [ -n "$N" ] && [ "$N" -ge 2 ] || { cat "$1"; fail "the transfer did not grow"; }
    has_msg "$1" "the transfer goes over $N connections (the window limited the path" \
        "the sender says it took $N while the window limited the path"
    has_msg "$2" "joined the transfer while it runs: $N connections" \
        "the receiver says connections joined while it ran"
    grep -q "^summary: .* over $N connections" "$2" || { cat "$2"; fail "the receiver's summary does not say $N"; }
    ok "both summaries say the transfer went over $N connections"
}

# grow SIZE [SENDER OPTIONS...] -- [RECEIVER OPTIONS...]: a transfer that
# grows
grow() {
    local size=$1 tx=() rx=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do tx+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    rx=("$@")
    gen in "$size" random   # the wire carries it all: -r sets the time
    listen rx.out rx.err -v -f -o out "${rx[@]}"
    expect 0 "auto on a long path, $size bytes ${tx[*]}" "${SHIM[@]}" "$WEIR" -v -r 10M \
        -i in -O "127.0.0.1:$LPORT" "${tx[@]}"
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq 0 ] || { cat rx.err; fail "the receiver exited $STATUS"; }
    same in out "a transfer that grew: what arrived is what was sent"
    has_msg "$TMP/err" "a round trip of 50.0 ms: one connection at first" \
        "the sender begins with one connection"
    has_msg rx.err "over one connection at first, and more join it while it runs" \
        "the receiver takes one, and more while it runs"
    grown "$TMP/err" rx.err
}

grow 41943049
grow 37748743 -z --key-file "$KEY" -- --key-file "$KEY"
grow 33554467 --zstd -s 65521
# the growth ends once a doubling raises nothing (the rate the sender's -r
# sets): in a longer transfer, whatever the first periods measured
grow 73400329
has_msg "$TMP/err" "more connections did not raise the total" \
    "the growth ends once more connections raise nothing"

# a probe: the first connection in its slow start, its window past half
# its send buffer's most on a long path (the fault shim's tcp_probe), takes
# eight at once; the sender's -r caps the total at what one window moves,
# so seven leave the transfer while it runs, each with a clean end, and
# the rest goes over the first: whole, with and without a key (slow joins
# where sanitized: a longer transfer there)
long_path 50 tcp_probe
for k in "" "--key-file $KEY -- --key-file $KEY"; do
    # shellcheck disable=SC2086  # k is the options, split as words
    grow "$(sized 25165843 33554467)" $k
    has_msg "$TMP/err" "a probe of 8 connections" "the sender probes with eight at once"
    has_msg "$TMP/err" "7 connections leave the transfer: it needs 1" \
        "the total, which one window moves, keeps one: seven leave"
done
long_path 50

# a receiver that takes one connection a transfer: one, unspread
gen in 8388617 random
listen rx.out rx.err -f -o out --streams 1
expect 0 "auto on a long path to a receiver that takes one" "${SHIM[@]}" "$WEIR" -v \
    -r 20M -i in -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || fail "the receiver exited $STATUS"
same in out "the data arrives over one connection"
grep -q "one connection at first\|over [0-9]* connections" "$TMP/err" &&
    { cat "$TMP/err"; fail "the sender spread to a receiver that takes one"; }
ok "the sender stays on one connection, unspread"

# a receiver whose window has no room for another connection (-m 1M: two
# chunks): each join is refused before it is answered, told why, and the
# transfer goes on over one, whole
gen in 20971529 random
listen rx.out rx.err -v -f -o out -m 1M -s 128k
expect 0 "auto to a receiver with no room for more" "${SHIM[@]}" "$WEIR" -v -r 20M -i in \
    -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat rx.err; fail "the receiver exited $STATUS"; }
same in out "the data arrives over the one connection"
has_msg rx.err "the buffer holds too few chunks for another connection (-m)" \
    "the receiver says why it refuses the joins"
has_msg "$TMP/err" "no connection more joined (receiver: the buffer holds too few chunks" \
    "the sender is told why, and goes on over one"
grep -q "joined the transfer while it runs" rx.err && fail "a join was taken without room"
ok "no join was taken"

# start_growing KEYED: a keyed (KEYED=1) or plain sender that grows, in the
# background (TPID; its errors in tx.err), once the second connection joined
start_growing() {
    local k=()
    [ "$1" = 1 ] && k=(--key-file "$KEY")
    gen in $(sized 25165843 41943049) random
    listen rx.out rx.err -v -f -o out "${k[@]}" "${@:2}"
    "${SHIM[@]}" "$WEIR" -v -r 20M -R 3M "${k[@]}" -i in -O "127.0.0.1:$LPORT" \
        "${@:2}" 2>tx.err &
    TPID=$!
    PIDS+=("$TPID")
    wait_for rx.err "joined the transfer while it runs: 2 connections" 20
}

# cut_all WHICH: ss -K the sender's connections to the listener (all, or the
# newest by its port, which is either)
cut_all() {
    local ports p filter=""
    ports=$(ss -Htn state established "( dport = :$LPORT )" | awk '{print $4}' |
            grep -o '[0-9]*$' | sort -n)
    [ "$1" = newest ] && ports=$(echo "$ports" | tail -n1)
    [ -n "$ports" ] || fail "no connection to cut"
    for p in $ports; do filter="$filter${filter:+ or }sport = :$p"; done
    ss -K -tn "( $filter )" >/dev/null 2>&1 || fail "ss -K"
}

# finish TX RX LABEL: the sender and the receiver end with TX and RX
finish() {
    wait_bounded "$TPID" 60
    [ "$STATUS" -eq "$1" ] || { cat tx.err; fail "$3: the sender exited $STATUS, want $1"; }
    wait_bounded "$LPID" 60
    [ "$STATUS" -eq "$2" ] || { cat rx.err; fail "$3: the receiver exited $STATUS, want $2"; }
    ok "$3: the sender exits $1, the receiver $2"
}

# a cut after the growth: resumed over one connection that grows again
for keyed in 0 1; do
    for which in newest all; do
        start_growing "$keyed"
        cut_all "$which"
        label="cut $which after the growth"
        [ "$keyed" = 1 ] && label="$label, with a key"
        finish 0 0 "$label"
        same in out "cut $which after the growth: resumed, and whole"
        has_msg tx.err "reconnected after" "the sender reconnected"
        [ "$(grep -c "over one connection at first" rx.err)" -ge 2 ] ||
            { cat rx.err; fail "the receiver did not begin again with one connection"; }
        ok "the resumed transfer begins again with one connection"
    done
done

# without --reconnect: the cut of the connection that joined fails both
# ends, naming the connection, and nothing is claimed whole
start_growing 0 --reconnect 0
cut_all newest
finish 5 5 "a cut after the growth without --reconnect"
grep -Eq "connection [0-9]+ of [0-9]+:" tx.err rx.err || { cat tx.err rx.err; fail "no message names it"; }
ok "a message names the connection that broke"
has_msg rx.err "summary: INCOMPLETE" "the receiver's summary says INCOMPLETE"

# a stranger, a join with a made-up token and another key while it grows:
# refused, and the transfer unharmed
start_growing 1
gen small 1000 random
expect 5 "another key knocks while the transfer grows" "$WEIR" --key-file "$OTHER" -i small \
    -O "127.0.0.1:$LPORT" --connect-timeout 0
expect 5 "no key knocks while the transfer grows" "$WEIR" -i small -O "127.0.0.1:$LPORT" \
    --connect-timeout 0
"$JOINER" join 127.0.0.1 "$LPORT" 00112233445566778899aabbccddeeff 2 3 >join.out 2>&1
grep -q "^joined" join.out && { cat join.out; fail "a made-up token joined"; }
ok "a join with a made-up token is not taken ($(head -c 80 join.out))"
finish 0 0 "the transfer the others knocked on"
same in out "the growing transfer is unharmed by the knocks"
n=$(grep -o "^summary: .* over [0-9]* connections" tx.err | grep -o '[0-9]* connections' | grep -o '[0-9]*')
[ "$(grep -c "joined the transfer while it runs" rx.err)" -eq $((${n:-1} - 1)) ] ||
    { cat tx.err rx.err; fail "the receiver took more joins than the sender made"; }
ok "no stranger joined it: the receiver took the sender's $((${n:-1} - 1)) joins alone"

# SIGTERM to the sender while it grows: it stops (143) and says so once;
# the receiver fails, INCOMPLETE
start_growing 0 --reconnect 0
kill -TERM "$TPID"
finish 143 5 "SIGTERM to a sender whose transfer grew"
has_msg tx.err "SIGTERM" "the sender names the signal"
has_msg rx.err "summary: INCOMPLETE" "the receiver's summary says INCOMPLETE"
prefix_ok=$(stat -c %s out)
cmp -s -n "$prefix_ok" in out || fail "what the receiver wrote is not a prefix of what was sent"
ok "what the receiver wrote ($prefix_ok bytes) is a prefix of what was sent"

done_testing
