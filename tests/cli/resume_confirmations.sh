#!/bin/bash
# Purpose: a sender that may resume says in its greeting whether it reads its
# input again for what the receiver lacks (bit 5: a plain stream of a regular
# file) or holds it in its buffer (a pipe, -z, a key, blocks under 1 KiB), and
# its receiver confirms every 32 MiB or every 4 MiB accordingly.  Recorded
# between the two by the test proxy; the receiver reads at a fixed rate so
# that its connection never runs dry (an idle connection is confirmed at once,
# which would hide the interval).
. "$(dirname "$0")/lib.sh"
SIZE=$(sized 100000000 50000000)
RATE=$(sized 60M 10M)   # well under what the sender sends, sanitized or not
gen "$TMP/in" "$SIZE" random
"$WEIR" -q --genkey "$TMP/key" --key-id t || fail "--genkey"
MIB=1048576

# recorded LABEL FROM [SENDER-OPTIONS...] -- [RECEIVER-OPTIONS...]: FROM is
# file or pipe; the greeting's features go to FEATURES, the largest step
# between two confirmations (from 0) to GAP and their number to NC (not with
# SEALED set)
recorded() {
    local label=$1 from=$2 sopts=() ropts=()
    shift 2
    split_options "$@"
    sopts=("${SOPTS[@]}") ropts=("${ROPTS[@]}")
    listen "$TMP/out" "$TMP/lerr" -r "$RATE" "${ropts[@]}"
    rm -f "$TMP/px" "$TMP/up" "$TMP/down"
    "$TESTTOOL" proxy "$LPORT" record 0 0 "$TMP/up" "$TMP/down" >"$TMP/px" &
    local px=$!
    PIDS+=("$px")
    wait_for "$TMP/px" "proxy listening on" 10
    local pport sst
    pport=$(grep -o '[0-9]*$' "$TMP/px")
    if [ "$from" = pipe ]; then
        cat "$TMP/in" | "$WEIR" "${sopts[@]}" -O "127.0.0.1:$pport" 2>"$TMP/serr"
    else
        "$WEIR" "${sopts[@]}" -i "$TMP/in" -O "127.0.0.1:$pport" 2>"$TMP/serr"
    fi
    sst=$?
    wait_bounded "$LPID" 60
    [ "$sst" -eq 0 ] && [ "$STATUS" -eq 0 ] ||
        { cat "$TMP/serr" "$TMP/lerr"; fail "$label: sender exit $sst, receiver exit $STATUS"; }
    wait "$px" || fail "$label: the proxy failed"
    same "$TMP/in" "$TMP/out" "$label: whole"
    FEATURES=$(od -An -tu4 -j16 -N4 "$TMP/up" | tr -d ' ')
    [ "$(head -c 9 "$TMP/up" | tail -c 1)" = G ] || fail "$label: no greeting recorded"
    # a sealed connection's records are TLS's after the greeting
    [ -n "${SEALED:-}" ] && { echo "# $label: features $FEATURES"; return; }
    "$TESTTOOL" records "$TMP/down" >"$TMP/recs" || fail "$label: the receiver's records"
    NC=$(grep -c '^C ' "$TMP/recs")
    GAP=$(awk '/^C / { if ($2 - last > gap) gap = $2 - last; last = $2 } END { print gap + 0 }' \
              "$TMP/recs")
    echo "# $label: features $FEATURES, $NC confirmations, largest step $GAP bytes"
}

bit() { echo $(( (FEATURES >> $1) & 1 )); }

recorded "regular file" file
[ "$(bit 4)" -eq 1 ] && [ "$(bit 5)" -eq 1 ] ||
    fail "regular file: features $FEATURES, want bits 4 and 5"
ok "a regular file's sender offers to resume and says it reads again (bits 4 and 5)"
# an idle connection is confirmed at once, so some steps may be shorter;
# one of more than twice 4 MiB is enough to tell 32 MiB from 4.  Under the
# sanitizers the connection runs dry too often for any step to be long:
# there only the upper bound holds (the interval is a matter of speed,
# which the release build shows)
if [ -z "${WEIR_SANITIZED:-}" ]; then
    [ "$GAP" -gt $((9 * MIB)) ] && [ "$GAP" -le $((33 * MIB)) ] ||
        fail "regular file: the largest step between confirmations is $GAP bytes"
    ok "its receiver confirms every 32 MiB (largest step $GAP bytes)"
else
    [ "$GAP" -le $((33 * MIB)) ] ||
        fail "regular file: the largest step between confirmations is $GAP bytes"
    ok "its receiver confirms at least every 32 MiB (largest step $GAP bytes)"
fi

recorded "pipe" pipe
[ "$(bit 4)" -eq 1 ] && [ "$(bit 5)" -eq 0 ] ||
    fail "pipe: features $FEATURES, want bit 4 and not 5"
ok "a pipe's sender offers to resume and holds (bit 4, not 5)"
[ "$NC" -ge $((SIZE / (5 * MIB))) ] && [ "$GAP" -le $((5 * MIB)) ] ||
    fail "pipe: $NC confirmations, the largest step $GAP bytes"
ok "its receiver confirms every 4 MiB ($NC confirmations, largest step $GAP bytes)"

recorded "-z" file -z
[ "$(bit 4)" -eq 1 ] && [ "$(bit 5)" -eq 0 ] || fail "-z: features $FEATURES"
[ "$GAP" -le $((5 * MIB)) ] || fail "-z: the largest step between confirmations is $GAP"
ok "-z holds its compressed stream (bit 4, not 5), confirmed every 4 MiB"

recorded "blocks of 512 bytes" file -s 512 -m 16M
[ "$(bit 4)" -eq 1 ] && [ "$(bit 5)" -eq 0 ] || fail "-s 512: features $FEATURES"
ok "-s 512: the notes could not hold 32 MiB of records, so bit 5 stays unset"

SEALED=1 recorded "a key" file --key-file "$TMP/key" -- --key-file "$TMP/key"
[ "$(bit 1)" -eq 1 ] && [ "$(bit 4)" -eq 1 ] && [ "$(bit 5)" -eq 0 ] ||
    fail "a key: features $FEATURES"
ok "a sealed stream holds its records (bits 1 and 4, not 5)"

recorded "--reconnect 0" file --reconnect 0
[ "$(bit 4)" -eq 0 ] && [ "$(bit 5)" -eq 0 ] && [ "$NC" -eq 0 ] ||
    fail "--reconnect 0: features $FEATURES, $NC confirmations"
ok "--reconnect 0 offers neither, and nothing is confirmed"

done_testing
