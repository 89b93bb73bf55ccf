#!/bin/bash
# streams_join_hostile.sh - --streams auto as an attacker sees it: while a
# transfer grows, the receiver's joins thread owns the listening socket
# (src/link/joins.c, listener_join_late).  Strangers knock there: a 'J'
# with a made-up token, malformed joins, a new stream header, a keyless
# join to a keyed transfer, another key, a crowd of silent peers, a churn
# of half greetings, a join dribbled byte by byte, handshakes that never
# finish; SIGTERM reaches the receiver while they wait; a join comes after
# the end.  Then an on-path reader of a keyless transfer (which can read
# the token in 'N', doc/security.md §11) joins and misbehaves: the
# receiver must fail with a message, never write what it did not verify
# past what it had.  A fixed --streams 4 gathers while a churn knocks.
# The long path is made up by the fault shim (tcp_long), as in
# streams_grow.sh.  Network on loopback, port 0; every wait is bounded.
. "$(dirname "$0")/lib.sh"
TOOLS=$(cd "$(dirname "$0")/../tools" && pwd)
cd "$TMP" || exit 1
python_with socket python3
ATT=("$PY" "$TOOLS/latejoin_attack.py")

KEY=$TMP/k.key
OTHER=$TMP/other.key
"$WEIR" --genkey "$KEY" --key-id alpha 2>/dev/null || fail "--genkey"
"$WEIR" --genkey "$OTHER" --key-id beta 2>/dev/null || fail "--genkey"
long_path 50
FAKE=00112233445566778899aabbccddeeff
# want N: case N runs (CASES, a list of numbers, picks some; default all)
want() { [ -z "${CASES:-}" ] || [[ " $CASES " == *" $1 "* ]]; }

# ---- 7. a fixed --streams 4 gathers its connections while a churn of half
# greetings and a crowd of silent peers knock (listener_gather)
if want 7; then
gen in 20971529 random
listen rx.out rx.err -v -f -o out
"${ATT[@]}" churn 127.0.0.1 "$LPORT" 6 64 >churn.out 2>&1 &
CPID=$!
PIDS+=("$CPID")
"${ATT[@]}" flood 127.0.0.1 "$LPORT" 100 5 0 >flood.out 2>&1 &
FPID=$!
PIDS+=("$FPID")
wait_for churn.out churning 20
expect 0 "--streams 4 inside a churn" "$WEIR" -v --streams 4 -i in -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat rx.err; fail "--streams 4 inside a churn: the receiver exited $STATUS"; }
same in out "--streams 4 inside a churn: the transfer is whole"
grep -q "^summary: .* over 4 connections" rx.err || { cat rx.err; fail "the receiver did not gather 4"; }
wait_bounded "$CPID" 20
wait_bounded "$FPID" 20
[ "$(grep -o 'opened [0-9]*' churn.out | grep -o '[0-9]*')" -ge 64 ] ||
    fail "the churn did not churn: $(cat churn.out)"
ok "the receiver gathered the sender's 4 connections inside a churn ($(tr '\n' ' ' <churn.out))"
fi


# start KEYED SIZE RATE [SENDER OPTIONS...] -- [RECEIVER OPTIONS...]: a
# receiver (LPID, rx.err) and a sender that grows (TPID, tx.err) moving SIZE
# random bytes at RATE; returns once the receiver took the first connection
start() {
    local keyed=$1 size=$2 rate=$3 k=() tx=() rx=()
    shift 3
    while [ $# -gt 0 ] && [ "$1" != -- ]; do tx+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    rx=("$@")
    [ "$keyed" = 1 ] && k=(--key-file "$KEY")
    gen in "$size" random
    listen rx.out rx.err -v -f -o out "${k[@]}" "${rx[@]}"
    "${SHIM[@]}" "$WEIR" -v -r "$rate" "${k[@]}" -i in -O "127.0.0.1:$LPORT" "${tx[@]}" \
        2>tx.err &
    TPID=$!
    PIDS+=("$TPID")
    wait_for rx.err "over one connection at first" 20
}

# finish TX RX LABEL: the sender and the receiver end with TX and RX
finish() {
    wait_bounded "$TPID" 60
    [ "$STATUS" -eq "$1" ] || { cat tx.err; fail "$3: the sender exited $STATUS, want $1"; }
    wait_bounded "$LPID" 60
    [ "$STATUS" -eq "$2" ] || { cat rx.err; fail "$3: the receiver exited $STATUS, want $2"; }
    ok "$3: the sender exits $1, the receiver $2"
}

# only_sender LABEL: every connection the receiver took while it ran is one
# the sender made (its summary's N - 1), and both say N
only_sender() {
    local n
    n=$(grep -o "^summary: .* over [0-9]* connections" tx.err | grep -o '[0-9]* connections' |
        grep -o '[0-9]*')
    [ "$(grep -c "joined the transfer while it runs" rx.err)" -eq $((${n:-1} - 1)) ] ||
        { cat tx.err rx.err; fail "$1: the receiver took more joins than the sender made"; }
    ok "$1: the receiver took the sender's $((${n:-1} - 1)) joins alone"
}

# grew LABEL: the transfer took a connection more while it ran
grew() {
    grep -q "joined the transfer while it runs: 2 connections" rx.err ||
        { cat tx.err rx.err; fail "$1: the transfer did not grow"; }
    ok "$1: the transfer grew"
}

# prefix LABEL: what the receiver wrote is a prefix of what was sent
prefix() {
    local n
    n=$(stat -c %s out 2>/dev/null || echo 0)
    cmp -s -n "$n" in out || fail "$1: what the receiver wrote is not a prefix of what was sent"
    [ "$n" -lt "$(stat -c %s in)" ] || fail "$1: the receiver wrote it all, yet failed"
    ok "$1: the receiver wrote $n bytes, a prefix of what was sent"
}

# ---- 1. strangers' joins while a keyless transfer grows -----------------------
if want 1; then
start 0 62914583 10M
wait_for rx.err "joined the transfer while it runs: 2 connections" 20
"${ATT[@]}" join 127.0.0.1 "$LPORT" "$FAKE" hold >a1.out 2>&1
has_msg a1.out "refused: it asked to join a transfer this listener does not have" \
    "a made-up token is refused and told why"
"$JOINER" join 127.0.0.1 "$LPORT" "$FAKE" 3 2 >a2.out 2>&1
has_msg a2.out "refused: malformed weir join record" "a join whose index is past its count is refused"
"$JOINER" join 127.0.0.1 "$LPORT" "$FAKE" 1 17 >a3.out 2>&1
has_msg a3.out "refused: malformed weir join record" "a join of 17 connections is refused"
"$JOINER" join 127.0.0.1 "$LPORT" "$FAKE" 1 2 nofeature >a4.out 2>&1
has_msg a4.out "refused: it asked to join a transfer" "a join without the streams bit is refused"
"$JOINER" join 127.0.0.1 "$LPORT" "$FAKE" 1 2 badsum >a5.out 2>&1
has_msg a5.out "refused: corrupt weir record (checksum mismatch)" \
    "a join with a bad checksum is refused"
"${ATT[@]}" header 127.0.0.1 "$LPORT" >a6.out 2>&1
has_msg a6.out "refused: a transfer is under way here: this listener takes only its connections" \
    "a new stream header is refused while the transfer grows"
expect 5 "a keyed weir sender knocks on a keyless transfer" "$WEIR" --key-file "$KEY" \
    -i a1.out -O "127.0.0.1:$LPORT" --connect-timeout 0
finish 0 0 "strangers' joins while a keyless transfer grows"
same in out "strangers' joins: the transfer is whole"
only_sender "strangers' joins"
grep -q "refused connection from 127.0.0.1:[0-9]*: it asked to join a transfer this listener" \
    rx.err || fail "the receiver does not log the made-up token's refusal"
ok "the receiver logs each refusal with its cause"
fi

# ---- 2. a churn of half greetings from the sender's own address, from
# before the transfer grows until it ends: the joins still get in
if want 2; then
start 0 62914583 10M
"${ATT[@]}" churn 127.0.0.1 "$LPORT" 7 64 >churn.out 2>&1 &
CPID=$!
PIDS+=("$CPID")
finish 0 0 "a churn of half greetings while the transfer grows"
wait_bounded "$CPID" 20
same in out "a churn of half greetings: the transfer is whole"
only_sender "a churn of half greetings"
echo "# churn: $(cat churn.out); $(grep -c "joined the transfer while it runs" rx.err) joins taken"
grew "a churn of half greetings ($(cat churn.out))"
[ "$(wc -l <rx.err)" -lt 400 ] || fail "the churn wrote $(wc -l <rx.err) log lines"
ok "the churn's refusals are logged boundedly ($(wc -l <rx.err) lines)"
fi

# ---- 3. a keyed transfer: a keyless join, another key, 20 handshakes that
# never finish and a join dribbled byte by byte, while it grows (the
# receiver's --timeout 3 makes the handshake time 3 s; at 5 MB/s the
# transfer outlasts the attacks, under TSan too)
if want 3; then
start 1 62914583 5M -- --timeout 3
wait_for rx.err "joined the transfer while it runs: 2 connections" 20
# (20, the dribbler and the sender's joins stay under the 32 places of one
# address: what ends each of them here is the handshake time, not the order
# in which a full table drops them, which listener_hostile and case 7 test)
"${ATT[@]}" flood 127.0.0.1 "$LPORT" 20 6 2 >flood.out 2>&1 &
FPID=$!
PIDS+=("$FPID")
wait_for flood.out "greetings" 20
"${ATT[@]}" slowloris 127.0.0.1 "$LPORT" 8 >slow.out 2>&1 &
SPID=$!
PIDS+=("$SPID")
"${ATT[@]}" keyless-on-keyed 127.0.0.1 "$LPORT" "$FAKE" >k1.out 2>&1
has_msg k1.out "refused: a sender without a key: this receiver takes only encrypted connections" \
    "a keyless join to a keyed transfer is refused and told why"
expect 5 "another key knocks while the keyed transfer grows" "$WEIR" --key-file "$OTHER" \
    -i k1.out -O "127.0.0.1:$LPORT" --connect-timeout 0
wait_bounded "$FPID" 20
has_msg flood.out "open 0" "20 handshakes that never finish are all dropped within 6 s"
wait_bounded "$SPID" 20
grep -Eq "^closed after [345]\.[0-9] s" slow.out || { cat slow.out; fail "the dribbled join was not dropped at the handshake time"; }
ok "a join dribbled byte by byte is dropped at the handshake time ($(cat slow.out))"
finish 0 0 "knocks on a keyed transfer that grows"
same in out "knocks on a keyed transfer: the transfer is whole"
only_sender "knocks on a keyed transfer"
has_msg rx.err "no finished handshake within 3 s" "the receiver names the unfinished handshakes"
fi

# ---- 4. SIGTERM to the receiver while strangers' handshakes wait on its
# joins thread: it stops at once, says so, and the sender fails
if want 4; then
start 1 62914583 10M --reconnect 0 -- --timeout 8
wait_for rx.err "joined the transfer while it runs: 2 connections" 20
"${ATT[@]}" flood 127.0.0.1 "$LPORT" 40 6 2 >flood.out 2>&1 &
FPID=$!
PIDS+=("$FPID")
sleep 0.5
t0=$(date +%s%N)
kill -TERM "$LPID"
wait_bounded "$LPID" 5
RX=$STATUS
t1=$(date +%s%N)
echo "# the receiver took $(( (t1 - t0) / 1000000 )) ms to stop"
[ "$RX" -eq 143 ] || { cat rx.err; fail "SIGTERM: the receiver exited $RX, want 143"; }
ok "SIGTERM while handshakes wait: the receiver exits 143 within 5 s"
has_msg rx.err "SIGTERM" "the receiver names the signal"
has_msg rx.err "summary: INCOMPLETE" "the receiver's summary says INCOMPLETE"
wait_bounded "$TPID" 30
[ "$STATUS" -eq 5 ] || { cat tx.err; fail "the sender exited $STATUS, want 5"; }
ok "the sender exits 5 once the receiver stopped"
prefix "SIGTERM to the receiver"
wait_bounded "$FPID" 20
fi

# onpath_relay: a receiver (LPID, rx.err) and an on-path reader in front
# of it (XPID), a relay that writes its port in pport and the token it reads
# in 'N' in tok; in, 60 MB to send through it
onpath_relay() {
    gen in 62914583 random
    listen rx.out rx.err -v -f -o out
    rm -f pport tok
    "${ATT[@]}" proxy pport "$LPORT" tok >proxy.out 2>&1 &
    XPID=$!
    PIDS+=("$XPID")
    wait_for_file pport 10
}
# onpath_send [SENDER OPTIONS...]: the sender (TPID, tx.err), through the
# relay, keyless, growing over the made-up long path
onpath_send() {
    "${SHIM[@]}" "$WEIR" -v -r 10M -i in -O "127.0.0.1:$(cat pport)" "$@" 2>tx.err &
    TPID=$!
    PIDS+=("$TPID")
}
# onpath PLAN [SENDER OPTIONS...]: a keyless transfer through an on-path
# reader, which joins it once it grew, with PLAN (latejoin_attack.py join);
# its lines in att.out
onpath() {
    local plan=$1
    shift
    onpath_relay
    onpath_send "$@"
    wait_for_file tok 10
    wait_for rx.err "joined the transfer while it runs: 2 connections" 20
    "${ATT[@]}" join 127.0.0.1 "$LPORT" "$(cat tok)" "$plan" 5 9 >att.out 2>&1
}
wait_for_file() {
    local i=0
    until [ -s "$1" ]; do
        i=$((i + 1))
        [ "$i" -gt $(($2 * 20)) ] && fail "no $1 after $2 s"
        sleep 0.05
    done
}
endpath() { kill "$XPID" 2>/dev/null; wait "$XPID" 2>/dev/null; }

if want 5; then
for plan in ${PLANS:-hold far dribble old huge zero junk}; do
    onpath "$plan"
    case $plan in
    hold | far | dribble)
        # it joined (the documented cost of no key) and waits, or holds a
        # chunk beyond the window: the stream ends without it, whole
        finish 0 0 "an on-path joiner ($plan)"
        endpath
        same in out "an on-path joiner ($plan): the transfer is whole"
        has_msg att.out "joined" "the on-path joiner ($plan) was taken: the token crossed in clear"
        echo "# $plan: the receiver says $(grep -o 'over [0-9]* connections' rx.err | tail -n1)," \
            "the sender $(grep -o 'over [0-9]* connections' tx.err | tail -n1)"
        ;;
    *)
        local_msg="not a chunk of a weir stream"
        [ "$plan" = old ] && local_msg="a chunk the stream already has"
        finish 6 6 "an on-path joiner that sends $plan"
        endpath
        has_msg rx.err "$local_msg" "the receiver names the $plan chunk: $local_msg"
        has_msg tx.err "$local_msg" "the sender is told why"
        has_msg rx.err "summary: INCOMPLETE" "the receiver's summary says INCOMPLETE"
        prefix "an on-path joiner that sends $plan"
        ;;
    esac
done
fi

# ---- 6. the on-path reader sends the sender's 'R' (its token) while the
# joins thread holds the socket, before the transfer grows
if want 6; then
    onpath_relay
    rm -f att.out   # the last plan's lines must not be read for this one's
    "${ATT[@]}" resume 127.0.0.1 "$LPORT" @tok >att.out 2>&1 &
    APID=$!
    wait_for att.out "waiting for the token" 10
    onpath_send
    # once the joins thread has taken that 'R' it answers no more: a join
    # that comes then is refused at once (busy), not left without a word
    wait_for rx.err "the sender came back on a new connection" 20
    "${ATT[@]}" join 127.0.0.1 "$LPORT" "$(cat tok)" hold >late.out 2>&1
    grep -q "busy" late.out || { cat late.out rx.err; fail "a join after the on-path 'R' was not refused"; }
    ok "a join after the on-path 'R' is refused at once ($(head -c 100 late.out))"
    finish 0 0 "an on-path 'R' while the transfer grows"
    endpath
    wait "$APID"
    same in out "an on-path 'R': the transfer is whole"
    has_msg rx.err "the sender came back on a new connection" \
        "the joins thread kept the on-path 'R' as the sender's return (no key: §9)"
    echo "# on-path R: $(grep -c 'reconnection' rx.err) summary with reconnections;" \
        "$(grep -o '[0-9]* reconnections\?' rx.err | tail -n1) at the receiver," \
        "$(grep -o '[0-9]* reconnections\?' tx.err | tail -n1) at the sender"
fi

# ---- 8. a join after the end: the listening socket is closed
if want 8; then
start 0 4194319 10M
finish 0 0 "a short transfer that may grow"
same in out "the short transfer is whole"
"$JOINER" join 127.0.0.1 "$LPORT" "$FAKE" 1 2 >late.out 2>&1
has_msg late.out "failed: connect: Connection refused" "a join after the end finds no listener"
fi

done_testing
