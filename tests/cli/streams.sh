#!/bin/bash
# streams.sh - one transfer over several connections (--streams N): round
# trips at awkward sizes and connection counts, with -z, --zstd, a key,
# holes and commands at both ends; a receiver that takes one connection; a
# stranger and a sender with another key knocking during a spread
# transfer; one connection of four cut in the middle, the first, and all
# four at once (resumed), and a cut without --reconnect (both ends fail).
# Each round trip ends in a comparison of what arrived.  Network on
# loopback, port 0.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
python_with json python3

KEY=$TMP/k.key
OTHER=$TMP/other.key
"$WEIR" --genkey "$KEY" --key-id alpha 2>/dev/null || fail "--genkey"
"$WEIR" --genkey "$OTHER" --key-id beta 2>/dev/null || fail "--genkey"

# spread N SIZE KIND [SENDER OPTIONS...] -- [RECEIVER OPTIONS...]
spread() {
    local n=$1 size=$2 kind=$3
    shift 3
    local tx=() rx=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do tx+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    rx=("$@")
    gen in "$size" "$kind"
    listen "$TMP/rx.out" "$TMP/rx.err" -f -o out "${rx[@]}"
    expect 0 "--streams $n, $size bytes ($kind) ${tx[*]}" "$WEIR" --streams "$n" -i in \
        -O "127.0.0.1:$LPORT" "${tx[@]}"
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq 0 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS"; }
    same in out "--streams $n, $size bytes: what arrived is what was sent"
    if [ "$n" -gt 1 ]; then
        has_msg "$TMP/err" "the transfer goes over $n connections" "the sender says $n"
        has_msg "$TMP/rx.err" "the transfer comes over $n connections" "the receiver says $n"
        grep -q "^summary: .* over $n connections" "$TMP/err" "$TMP/rx.err" ||
            fail "a summary does not say $n connections"
        [ "$(grep -c "^summary: .* over $n connections" "$TMP/err" "$TMP/rx.err" |
             awk -F: '{s += $2} END {print s}')" -eq 2 ] || fail "not both summaries say $n"
        ok "both summaries say the transfer went over $n connections"
    fi
}

# awkward sizes and counts: less than a chunk, one byte past one, many
spread 2 1 random
spread 3 262145 random
spread 4 3145727 mixed
spread 16 $(sized 9437189 2097153) random -s 4093
spread 7 $(sized 20971523 4194307) mixed -z
spread 5 $(sized 12582917 3145739) text --zstd
spread 4 $(sized 16777259 4194311) mixed --key-file "$KEY" -z -- --key-file "$KEY"
spread 3 $(sized 8388617 2097169) random --key-file "$KEY" -T 1 -- --key-file "$KEY"
spread 1 1048583 random

# holes: a sparse file keeps them through the spread stream
dd if=/dev/urandom of=holes bs=4096 count=3 2>/dev/null
dd if=/dev/urandom of=holes bs=4096 count=2 seek=600 conv=notrunc 2>/dev/null
truncate -s $((4096 * 1000 + 5)) holes
listen "$TMP/rx.out" "$TMP/rx.err" -f -o sparse.out
expect 0 "--streams 3 --sparse" "$WEIR" --streams 3 --sparse -i holes -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || fail "the receiver exited $STATUS"
same holes sparse.out "a sparse file arrives whole over 3 connections"
[ "$(du -k sparse.out | cut -f1)" -lt 400 ] || fail "the holes were written as data"
ok "its holes stay holes"

# commands at both ends
gen in 5242887 mixed
listen "$TMP/rx.out" "$TMP/rx.err" -- sh -c 'cat > cmd.out'
expect 0 "--streams 4 from a producer" "$WEIR" --streams 4 -z -O "127.0.0.1:$LPORT" -- cat in
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || fail "the receiver exited $STATUS"
same in cmd.out "a producer's output reaches the consumer whole over 4 connections"

# a receiver that takes one connection a transfer: the sender says so and
# sends over one, and the progress says one
gen in 2097169 random
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out --streams 1
expect 0 "--streams 8 to a receiver that takes one" "$WEIR" --streams 8 -i in \
    -O "127.0.0.1:$LPORT" --progress=json=tx.jsonl
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || fail "the receiver exited $STATUS"
same in out "the data arrives over one connection"
has_msg "$TMP/err" "the receiver takes one connection a transfer" "the sender says why"
"$PY" - tx.jsonl <<'EOF' || fail "the progress does not say one connection"
import json, sys
end = [json.loads(l) for l in open(sys.argv[1])][-1]
assert end["outputs"][0]["streams"] == 1, end["outputs"][0]
EOF
ok "the progress says one connection"

# the progress of a spread transfer: one entry for each connection
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out
expect 0 "--streams 4 with --progress=json" "$WEIR" --streams 4 -i in -R 4M \
    -O "127.0.0.1:$LPORT" --progress=json=tx.jsonl --interval 0.2
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || fail "the receiver exited $STATUS"
same in out "the data arrives over 4 connections"
"$PY" - tx.jsonl "${WEIR_PLATFORM:-linux}" <<'EOF' || fail "the progress does not show 4 connections"
import json, sys
end = [json.loads(l) for l in open(sys.argv[1])][-1]
o = end["outputs"][0]
assert o["streams"] == 4 and len(o["connections"]) == 4, o
if sys.argv[2] == "linux":
    assert all(c["rtt_ms"] is not None and c["cwnd"] for c in o["connections"]), o
EOF
ok "the progress has 4 connections, each with its path"

# a stranger and a sender with another key, during a spread transfer:
# refused, and the transfer unharmed
gen in $(sized 8388617 4194319) random
listen "$TMP/rx.out" "$TMP/rx.err" -f -o out --key-file "$KEY"
"$WEIR" --streams 4 --key-file "$KEY" -R 2M -i in -O "127.0.0.1:$LPORT" 2>tx.err &
TPID=$!
PIDS+=("$TPID")
wait_for "$TMP/rx.err" "comes over 4 connections" 20
gen small 1000 random
expect 5 "a sender with another key knocks during the transfer" "$WEIR" --key-file "$OTHER" \
    -i small -O "127.0.0.1:$LPORT" --connect-timeout 0
expect 5 "a sender without a key knocks during the transfer" "$WEIR" -i small \
    -O "127.0.0.1:$LPORT" --connect-timeout 0
# (refused in clear as busy, or cut before its greeting: either way no
# handshake; the impostor's own status says only whether it could finish)
"$IMPOSTOR" dial 127.0.0.1 "$LPORT" >impostor.out 2>&1
! grep -q "handshake complete" impostor.out ||
    { cat impostor.out; fail "an impostor got somewhere during the transfer"; }
ok "an impostor knocking during the transfer gets no handshake"
wait_bounded "$TPID" 60
[ "$STATUS" -eq 0 ] || { cat tx.err; fail "the spread sender exited $STATUS"; }
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS"; }
same in out "the spread transfer is unharmed by the knocks"

# cut_conns CONNS: ss -K on the sender's connections to the listener: "newest",
# "oldest" or "all"
cut_conns() {
    local ports
    ports=$(ss -Htn state established "( dport = :$LPORT )" | awk '{print $4}' |
            grep -o '[0-9]*$' | sort -n)
    case $1 in
    newest) ports=$(echo "$ports" | tail -n1) ;;
    oldest) ports=$(echo "$ports" | head -n1) ;;
    esac
    [ -n "$ports" ] || fail "no connection to cut"
    # one ss for all: cut one by one, a later port could by then be a
    # connection the sender made again after the first cut
    local p filter=""
    for p in $ports; do filter="$filter${filter:+ or }sport = :$p"; done
    ss -K -tn "( $filter )" >/dev/null 2>&1 || fail "ss -K"
}

# spread_cut CUT TX RX RX_OPTIONS SENDER...: a new "in" sent over 4
# connections by SENDER (its errors in tx.err) to a receiver with
# RX_OPTIONS; CUT (cut_conns) once 1 MiB arrived; the sender must exit TX
# and the receiver RX
spread_cut() {
    local what=$1 txw=$2 rxw=$3 rxo=$4
    shift 4
    gen in 6291469 random   # 2 s at -R 3M: the cut comes after its first 1 MiB
    # shellcheck disable=SC2086
    listen "$TMP/rx.out" "$TMP/rx.err" -f -o out $rxo
    "$@" --streams 4 -i in -O "127.0.0.1:$LPORT" 2>tx.err &
    TPID=$!
    PIDS+=("$TPID")
    wait_for "$TMP/rx.err" "comes over 4 connections" 20
    wait_size out 1048576 20
    cut_conns "$what"
    wait_bounded "$TPID" 60
    [ "$STATUS" -eq "$txw" ] || { cat tx.err; fail "the sender exited $STATUS, want $txw (cut: $what)"; }
    wait_bounded "$LPID" 60
    [ "$STATUS" -eq "$rxw" ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS, want $rxw"; }
}

# a spread transfer that breaks resumes as one: every connection is made
# again, and the stream goes on from where the receiver stopped
if on_linux "ss -K"; then
    for what in newest oldest all; do
        for keyed in "" "--key-file $KEY"; do
            # shellcheck disable=SC2086
            spread_cut "$what" 0 0 "$keyed" "$WEIR" -R 3M $keyed
            same in out "cut $what of 4 connections${keyed:+, with a key}: resumed, and whole"
            grep -Eq "^summary: .*[0-9]+ reconnections?," tx.err ||
                fail "the sender's summary counts no reconnection"
            grep -Eq "^summary: .*[0-9]+ reconnections?," "$TMP/rx.err" ||
                fail "the receiver's summary counts no reconnection"
            ok "both summaries count the reconnection"
        done
    done

    # a connection that cannot be made while the others join again after a
    # cut (the 7th: 1 to 4 at first, the 5th rejoins, 6 to 8 join): the
    # sender breaks again and comes back, the receiver takes it back while
    # it gathers, and the transfer is whole
    spread_cut newest 0 0 "" env ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
        WEIR_FAULT=connect_refuse=7 LD_PRELOAD="$FAULTSHIM" "$WEIR" -R 3M
    same in out "a join refused after a cut: mended again, and whole"
    grep -Eq "connection [234] of 4: connect: Connection refused; reconnecting again" tx.err ||
        { cat tx.err; fail "the sender does not say which join failed"; }
    ok "the sender says which join failed, and that it reconnects again"
    grep -q "the sender came back before its other connections had all joined" \
        "$TMP/rx.err" || { cat "$TMP/rx.err"; fail "the receiver did not take it back"; }
    ok "the receiver takes the sender back while the others gather"

    # --reconnect 0: a cut fails both ends, each saying which connection,
    # and nothing is claimed whole
    spread_cut newest 5 5 "--reconnect 0" "$WEIR" -R 2M --reconnect 0
    ok "without --reconnect both ends fail (5) when one of the connections is cut"
    grep -q "connection . of 4" tx.err "$TMP/rx.err" ||
        { cat tx.err "$TMP/rx.err"; fail "no message names the connection"; }
    ok "a message names the connection that broke"
    grep -q "summary: INCOMPLETE" "$TMP/rx.err" || fail "the receiver's summary claims it whole"
    ok "the receiver's summary says INCOMPLETE"
fi

# the receiver's disk fills in the middle of a spread transfer (ENOSPC on
# its standard output after 3 MiB): both ends fail with exit 4, and the
# sender says what the receiver said
gen in $(sized 12582917 6291469) random
ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    WEIR_FAULT=write_enospc=3145728 LD_PRELOAD=$FAULTSHIM listen "$TMP/full.out" "$TMP/rx.err"
expect 4 "a spread sender to a receiver whose disk fills" "$WEIR" --streams 4 -i in \
    -O "127.0.0.1:$LPORT"
has_msg "$TMP/err" "receiver: output <stdout>: write: No space left on device" \
    "the spread sender says the receiver's disk is full"
grep -q "over 4 connections" "$TMP/err" || { cat "$TMP/err"; fail "the transfer was not spread"; }
ok "the transfer that met the full disk was spread"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 4 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS, want 4"; }
has_msg "$TMP/rx.err" "summary: INCOMPLETE" "the receiver's summary says INCOMPLETE"

# what --streams refuses
expect 2 "--streams 17" "$WEIR" --streams 17 -i in -O 127.0.0.1:1
has_msg "$TMP/err" "not a whole number from 1 to 16" "the range is named"
expect 2 "--streams with --raw" "$WEIR" --streams 4 --raw -i in -O 127.0.0.1:1
has_msg "$TMP/err" "contradict" "--raw cannot spread"
expect 2 "--streams without a connection" "$WEIR" --streams 4 -i in -o /dev/null
has_msg "$TMP/err" "--streams needs -O" "the missing -O is named"

done_testing
