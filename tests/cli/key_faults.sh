#!/bin/bash
# Purpose: the keyed transport's promises under attack and under faults.
# - Order holds for aborts: an attacker on the path who drops sealed data
#   records and lets the sender's abort through (testtool proxy sealdrop)
#   is caught: the abort counts the data records sent before it, so the
#   receiver reports a forgery (exit 6), not the sender's reason.
# - Keys outlive nobody who uses them: a keyed sender whose workers seal
#   slowly (faultshim seal_slow) loses its receiver mid-stream; it fails
#   with the network's status and message, and no sealing worker touches
#   the connection's keys after they went (the sanitizer builds would
#   report it; a crash would end it by a signal).
# - Secrets stay out of core dumps: a weir holding a key is not dumpable
#   (the files of its /proc entry belong to root, which is what PR_SET_DUMPABLE 0
#   does), while one without a key is.
. "$(dirname "$0")/lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"

"$WEIR" -q --genkey "$TMP/k" --key-id alpha || fail "--genkey"

# listen_keyed OUT ERR: a keyed listener; sets LPID and LPORT
listen_keyed() {
    rm -f "$1" "$2"   # never read a previous listener's port
    "$WEIR" -v --key-file "$TMP/k" -I 0 -o "$1" 2>"$2" &
    LPID=$!
    PIDS+=("$LPID")
    wait_for "$2" "listening on" 10
    LPORT=$(grep -o 'listening on [^ ]*' "$2" | grep -o '[0-9]*$')
}

# 1. data records dropped, the abort let through: after the stream header
# and one whole block (its prefix, data and suffix records), nothing but
# control records passes.  The producer fails a second after its last byte,
# so the sender has sent every block before it aborts.
# abort_through KEEP BYTES LABEL: a keyed sender whose producer writes
# BYTES and fails (exit 3) a second later, through a proxy that passes its
# first KEEP sealed data records and then only control records; sets
# STATUS, the receiver's exit status
abort_through() {
    listen_keyed "$TMP/out" "$TMP/lerr"
    rm -f "$TMP/proxy.out"   # a wait must not find the last run's line
    "$TESTTOOL" proxy "$LPORT" sealdrop "$1" >"$TMP/proxy.out" &
    PIDS+=($!)
    wait_for "$TMP/proxy.out" "proxy listening on" 10
    PPORT=$(awk '{print $4}' "$TMP/proxy.out")
    expect 3 "$3: the sender whose producer fails" \
        "$WEIR" -q --key-file "$TMP/k" -O "127.0.0.1:$PPORT" -- \
        sh -c "head -c $2 /dev/urandom; sleep 1; exit 3"
    wait_bounded "$LPID" 30
}
abort_through 4 "$(sized 20000000 6000000)" "dropped records"
[ "$STATUS" -eq 6 ] || { cat "$TMP/lerr" >&2; fail "dropped records, then the abort: the receiver exited $STATUS, want 6"; }
ok "dropped records, then the abort: the receiver calls it a forgery (exit 6)"
has_msg "$TMP/lerr" "an encrypted record does not open (corrupt, forged, dropped" \
    "the receiver says records were dropped"
grep -q "exited with status 3" "$TMP/lerr" &&
    fail "the receiver took the abort for the sender's reason"
ok "the receiver does not pass on an abort that stands for dropped records"
# the control case: the same proxy passing everything gives the sender's reason
abort_through 1000000 3000000 "nothing dropped"
[ "$STATUS" -eq 3 ] || { cat "$TMP/lerr" >&2; fail "a whole abort: the receiver exited $STATUS, want 3"; }
has_msg "$TMP/lerr" "exited with status 3" "a whole abort gives the sender's reason"

# 2. a receiver gone while workers still seal for the connection
head -c "$(sized 40000000 12000000)" /dev/urandom >"$TMP/big"
for cut in kill reconnect; do
    listen_keyed "$TMP/out" "$TMP/lerr"
    extra=(--reconnect 0)
    [ "$cut" = reconnect ] && extra=(--reconnect 2)
    LD_PRELOAD="$FAULTSHIM" WEIR_FAULT=seal_slow=200 \
        "$WEIR" -q -T 4 --key-file "$TMP/k" -O "127.0.0.1:$LPORT" "${extra[@]}" \
        -i "$TMP/big" 2>"$TMP/serr" &
    SPID=$!
    PIDS+=("$SPID")
    # the receiver goes once the stream is under way (some of it written);
    # a loaded machine may take long to start it, so the bound is wide
    for _ in $(seq 600); do
        [ -s "$TMP/out" ] && break
        sleep 0.05
    done
    [ -s "$TMP/out" ] || { cat "$TMP/serr" "$TMP/lerr" >&2; fail "seal_slow ($cut): the stream never began"; }
    kill -9 "$LPID"
    wait_bounded "$SPID" 60
    [ "$STATUS" -eq 5 ] || { cat "$TMP/serr" >&2; fail "seal_slow ($cut): the sender exited $STATUS, want 5"; }
    ok "seal_slow ($cut): the sender fails with the network's status"
    grep -q "AddressSanitizer\|ThreadSanitizer\|runtime error" "$TMP/serr" &&
        { cat "$TMP/serr" >&2; fail "seal_slow ($cut): a sanitizer report"; }
    ok "seal_slow ($cut): no sealing worker touched freed keys"
    has_msg "$TMP/serr" "output 127.0.0.1:$LPORT:" "seal_slow ($cut): the message names the output"
done

# 3. not dumpable while holding a key (an unprivileged user: root's
# processes are owned by root either way)
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    # the user needs to reach the binary: a copy in a folder of its own (the
    # build may sit under a folder only its owner can enter)
    mkdir -p "$TMP/nobody"
    cp "$TMP/k" "$TMP/nobody/k"
    cp "$WEIR" "$TMP/nobody/weir"
    chown -R 65534:65534 "$TMP/nobody"
    chmod 755 "$TMP" "$TMP/nobody"
    for keyed in yes no; do
        key=()
        [ "$keyed" = yes ] && key=(--key-file "$TMP/nobody/k")
        setpriv --reuid=65534 --regid=65534 --clear-groups \
            "$TMP/nobody/weir" -v "${key[@]}" -I 0 -o /dev/null 2>"$TMP/nobody/err" &
        NPID=$!
        PIDS+=("$NPID")
        wait_for "$TMP/nobody/err" "listening on" 10
        owner=$(stat -c %u "/proc/$NPID/status")
        core=$(awk '/^Max core file size/ {print $6}' "/proc/$NPID/limits")   # the hard limit
        kill "$NPID"
        wait_bounded "$NPID" 10
        if [ "${WEIR_PLATFORM:-linux}" = posix ]; then
            # the portable path: no core file (RLIMIT_CORE 0), whatever the owner
            if [ "$keyed" = yes ]; then
                [ "$core" = 0 ] || fail "a keyed weir (posix) may dump core: hard limit $core"
                ok "a weir holding a key can dump no core (hard RLIMIT_CORE 0)"
            else
                [ "$core" = "$(ulimit -H -c)" ] ||
                    fail "a weir without a key: hard core limit $core, want $(ulimit -H -c)"
                ok "a weir without a key keeps its core limit (the check can fail)"
            fi
        elif [ "$keyed" = yes ]; then
            [ "$owner" -eq 0 ] || fail "a keyed weir of uid 65534 is dumpable (/proc owner $owner)"
            ok "a weir holding a key is not dumpable"
        else
            [ "$owner" -eq 65534 ] || fail "a weir without a key: /proc owner $owner, want 65534"
            ok "a weir without a key is dumpable as usual (the check can fail)"
        fi
    done
else
    fail "the dumpability check needs root and setpriv (util-linux)"
fi

done_testing
