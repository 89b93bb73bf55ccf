#!/bin/bash
# Purpose: injected system call faults (EIO on read, ENOSPC on write and at close,
# EINTR storms, real short writes, allocation failure, descriptor exhaustion) give
# identical output or the right exit status and message.
. "$(dirname "$0")/lib.sh"
: "${FAULTSHIM:?FAULTSHIM must name the fault shim}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
shim() { WEIR_FAULT=$1 LD_PRELOAD=$FAULTSHIM "${@:2}"; }
gen "$TMP/in" 3000000 mixed

shim read_eio=1000000 "$WEIR" -q -s 64k <"$TMP/in" >"$TMP/out" 2>"$TMP/err"
st=$?
[ "$st" -eq 3 ] || { cat "$TMP/err"; fail "EIO on read: exit $st, want 3"; }
has_msg "$TMP/err" "input <stdin>: read: Input/output error" "EIO on read: exit 3 with the cause"

shim write_enospc=500000 "$WEIR" -q -s 64k <"$TMP/in" >"$TMP/out" 2>"$TMP/err"
st=$?
[ "$st" -eq 4 ] || { cat "$TMP/err"; fail "ENOSPC on write: exit $st, want 4"; }
has_msg "$TMP/err" "output <stdout>: write: No space left on device" "ENOSPC on write: exit 4 with the cause"

shim close_enospc=/closefail.out "$WEIR" -q -i "$TMP/in" -o "$TMP/closefail.out" 2>"$TMP/err"
st=$?
[ "$st" -eq 4 ] || { cat "$TMP/err"; fail "ENOSPC at close: exit $st, want 4"; }
has_msg "$TMP/err" "closefail.out: close: No space left on device" "ENOSPC at close: exit 4 with the cause"

for k in 2 3 7; do
    shim eintr=$k "$WEIR" -q -s 64k <"$TMP/in" >"$TMP/out" || fail "EINTR every $k calls: exit $?"
    same "$TMP/in" "$TMP/out" "EINTR on every ${k}th call changes nothing"
    shim eintr=$k "$WEIR" -q -z -T 2 <"$TMP/in" | shim eintr=$k "$WEIR" -q -d >"$TMP/out" \
        || fail "EINTR with -z | -d"
    same "$TMP/in" "$TMP/out" "EINTR on every ${k}th call, -z | -d"
done
listen "$TMP/out" "$TMP/lerr" -q
shim eintr=3 "$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "EINTR over TCP: exit $?"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "EINTR on every 3rd call over TCP"

for m in 1 7 4096; do
    shim short_write=$m "$WEIR" -q -s 64k <"$TMP/in" >"$TMP/out" || fail "short writes of $m"
    same "$TMP/in" "$TMP/out" "real short writes of at most $m bytes"
done
listen "$TMP/out" "$TMP/lerr" -q
shim short_write=1000 "$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "short writev"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "short writev() of a framed stream"

# non-blocking stdin and stdout: EAGAIN must be waited out in poll()
"$TESTTOOL" nonblock "$WEIR" -q -s 64k <"$TMP/in" | "$TESTTOOL" slowread 30000000 >"$TMP/out" \
    || fail "non-blocking descriptors"
same "$TMP/in" "$TMP/out" "non-blocking stdin and stdout (EAGAIN)"

# the buffer cannot be allocated: a clean error before connecting anywhere
listen /dev/null "$TMP/lerr"
shim mmap_enomem=100000000 "$WEIR" -q -m 1G -O "127.0.0.1:$LPORT" -i "$TMP/in" 2>"$TMP/err"
st=$?
[ "$st" -eq 1 ] || { cat "$TMP/err"; fail "allocation failure: exit $st, want 1"; }
has_msg "$TMP/err" "buffer: cannot reserve" "allocation failure: exit 1, 'buffer: cannot reserve'"
grep -q "connection from" "$TMP/lerr" && fail "weir connected although it could not allocate"
ok "nothing was connected before the allocation failed"
if [ -z "${WEIR_SANITIZED:-}" ]; then
    # the real thing; sanitizer runtimes need far more address space than this
    ( ulimit -v 400000; "$WEIR" -q -m 2G -O "127.0.0.1:$LPORT" -i "$TMP/in" ) 2>"$TMP/err"
    st=$?
    [ "$st" -eq 1 ] || { cat "$TMP/err"; fail "ulimit -v: exit $st, want 1"; }
    has_msg "$TMP/err" "buffer: cannot reserve" "ulimit -v: exit 1 before connecting"
fi
kill "$LPID"

# out of file descriptors
( ulimit -n 12; "$WEIR" -q -i "$TMP/in" -o "$TMP/f1" -o "$TMP/f2" -o "$TMP/f3" -o "$TMP/f4" \
    -o "$TMP/f5" -o "$TMP/f6" -o "$TMP/f7" -o "$TMP/f8" -o "$TMP/f9" -o "$TMP/f10" ) 2>"$TMP/err"
st=$?
[ "$st" -ne 0 ] && [ "$st" -lt 128 ] || { cat "$TMP/err"; fail "descriptor exhaustion: exit $st"; }
has_msg "$TMP/err" "Too many open files" "out of descriptors: exit $st, 'Too many open files'"
done_testing
