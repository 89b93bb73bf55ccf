#!/bin/bash
# Purpose: every numeric option is accepted at its upper bound and refused just
# past it (exit 2, before any I/O), so no value wraps around inside weir (a
# --timeout of 4294968 s used to become a TCP_USER_TIMEOUT of 704 ms).  Also:
# --connect-timeout waits the whole time it says, and a failed or empty
# transfer gets no verdict about which side was slower.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 3000 text
accepted() {   # accepted LABEL ARGS...: a small copy with ARGS exits 0 and is identical
    local label=$1
    shift
    rm -f "$TMP/out"
    "$WEIR" -q "$@" -i "$TMP/in" -o "$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "$label: exit $?"; }
    same "$TMP/in" "$TMP/out" "$label: accepted"
}
refused() {   # refused MESSAGE ARGS...
    local msg=$1
    shift
    "$WEIR" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    local st=$?
    [ "$st" -eq 2 ] || { cat "$TMP/err"; fail "weir $*: exit $st, want 2"; }
    grep -qF -- "$msg" "$TMP/err" || { cat "$TMP/err"; fail "weir $*: no '$msg'"; }
    ok "weir $* -> $msg"
}
accepted "--timeout 2147483" --timeout 2147483
refused "--timeout: 2147484 seconds is too long" --timeout 2147484
refused "--timeout: 4294968 seconds is too long" --timeout 4294968
refused "--accept-timeout: 10000000000 seconds is too long" -I 0 --accept-timeout 10000000000
refused "--reconnect: '0x10' is not a number of seconds" --reconnect 0x10
refused "--timeout: '1e3' is not a number of seconds" --timeout 1e3
refused "--timeout: ' 5' is not a number of seconds" --timeout " 5"
refused "--timeout: '.' is not a number of seconds" --timeout .
refused "is not a number of seconds" --timeout inf
refused "is not a number of seconds" --timeout -1
"$WEIR" -q -z -T 64 -i "$TMP/in" | "$WEIR" -q -d -T 64 >"$TMP/out" || fail "-T 64: exit $?"
same "$TMP/in" "$TMP/out" "-z -T 64 | -d -T 64: accepted"
refused "-T: '65' is not a whole number from 1 to 64" -T 65
"$WEIR" -q --compress=12 -i "$TMP/in" | "$WEIR" -q -d >"$TMP/out" || fail "--compress=12: exit $?"
same "$TMP/in" "$TMP/out" "--compress=12: accepted"
refused "--compress: '13'" --compress=13
accepted "-s 16" -s 16 -m 64k
for bs in 512 1k 1500 1900; do
    "$WEIR" -q -z -s "$bs" -i "$TMP/in" | "$WEIR" -q -d >"$TMP/out" || fail "-z -s $bs: exit $?"
    same "$TMP/in" "$TMP/out" "-z -s $bs: accepted"
done
refused "-s: 15 is out of range" -s 15
accepted "-s 1G -m 2G" -s 1G -m 2G
refused "-s: 2G is out of range" -s 2G -m 4G
accepted "-b 16777216 -s 16" -b 16777216 -s 16
refused "too many blocks" -b 16777217 -s 16
refused "-b: '18446744073709551616' is not a positive number of blocks" -b 18446744073709551616
refused "-b: '18446744073709551615' blocks is absurdly large" -b 18446744073709551615
accepted "-r at the largest size" -r 16777215T -R 16777215T
refused "-r: '16777216T' is not a positive rate" -r 16777216T
accepted "--size at the largest size" --size 16777215T
accepted "--readahead 1P" --readahead 1P
refused "--readahead: 1025T is larger than any buffer" --readahead 1025T
accepted "-P 100 -p 0" -P 100 -p 0
refused "-P: '101' is not a percentage" -P 101
refused "-O: '127.0.0.1:65536' has no valid port" -O 127.0.0.1:65536
refused "-I: '99999999999999999999' has no valid port" -I 99999999999999999999
refused "-m: '91%' is not a percentage of memory" -m 91%

# --connect-timeout 1 tries for the whole second it promises
t0=$(date +%s%N)
expect 5 "--connect-timeout 1 to a closed port" "$WEIR" --connect-timeout 1 -O 127.0.0.1:1 -i "$TMP/in"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -ge 1000 ] || fail "gave up after $(( (t1 - t0) / 1000000 )) ms, before the promised 1 s"
ok "gave up no earlier than the promised 1 s"
has_msg "$TMP/err" "gave up after 1 s" "says how long it tried"
grep -q "slower side\|bottleneck\|kept pace" "$TMP/err" && fail "a failed connect got a verdict: $(cat "$TMP/err")"
ok "a failed connect gets no bottleneck verdict"
"$WEIR" </dev/null >/dev/null 2>"$TMP/err" || fail "empty transfer failed"
has_msg "$TMP/err" "summary: 0 B" "an empty transfer has a summary"
grep -q "slower side\|bottleneck\|kept pace" "$TMP/err" && fail "a 0-byte transfer got a verdict: $(cat "$TMP/err")"
ok "a 0-byte transfer gets no bottleneck verdict"
done_testing
