#!/bin/bash
# Purpose: the platform layer is what the build chose.  The POSIX build
# (-Dplatform=posix, the path of FreeBSD, illumos and macOS) references none
# of the calls that only Linux has; the Linux build keeps its fast paths.
# And the portable path's own promises hold on either build: a signal ends
# a transfer at once, and a child made while other threads open descriptors
# inherits none of them.
. "$(dirname "$0")/lib.sh"

command -v nm >/dev/null || fail "nm (binutils) is needed"
linux_only=(splice prctl accept4 pipe2 sigtimedwait posix_fadvise posix_fadvise64)
nm -u "$WEIR" | sed 's/@.*//' | awk '{print $2}' | sort -u >"$TMP/undef"
[ -s "$TMP/undef" ] || fail "nm found no undefined symbols in $WEIR"
for f in "${linux_only[@]}"; do
    if [ "${WEIR_PLATFORM:-linux}" = posix ]; then
        grep -qx "$f" "$TMP/undef" && fail "the POSIX build references $f"
    fi
done
if [ "${WEIR_PLATFORM:-linux}" = posix ]; then
    ok "the POSIX build references none of ${linux_only[*]}"
    for f in pipe accept sigwait; do
        grep -qx "$f" "$TMP/undef" || fail "the POSIX build does not use $f"
    done
    ok "the POSIX build takes the portable calls (pipe, accept, sigwait)"
else
    for f in splice accept4 pipe2 sigtimedwait prctl; do
        grep -qx "$f" "$TMP/undef" || fail "the Linux build lost its fast path $f"
    done
    ok "the Linux build keeps splice, accept4, pipe2, sigtimedwait and prctl"
fi

# a signal ends a transfer within a bound, on either path (the POSIX path
# looks at pending signals between pauses)
mkfifo "$TMP/fifo"
exec 7<>"$TMP/fifo"
"$WEIR" -q -i "$TMP/fifo" -o "$TMP/out" 2>"$TMP/err" &
pid=$!
PIDS+=("$pid")
printf 'some bytes' >&7
for i in $(seq 200); do [ -e "$TMP/out" ] && break; sleep 0.05; done
[ -e "$TMP/out" ] || fail "weir did not open its output within 10 s"
kill -TERM "$pid"
wait_bounded "$pid" 5
[ "$STATUS" -eq 143 ] || fail "SIGTERM to a weir reading a FIFO: exit $STATUS, want 143"
exec 7>&-
ok "SIGTERM ends a weir waiting on its input (exit 143)"

# a producer inherits no descriptor of weir's beyond its standard three
"$WEIR" -q -T 2 -o "$TMP/fds" -- sh -c 'ls /proc/$$/fd' 2>"$TMP/err" ||
    fail "a producer that lists its descriptors: exit $?"
sort -n "$TMP/fds" | tr '\n' ' ' >"$TMP/fdlist"
grep -qx "0 1 2 [0-9]* *" "$TMP/fdlist" || fail "the producer inherited: $(cat "$TMP/fdlist")"
ok "a producer holds only its standard descriptors ($(cat "$TMP/fdlist"))"
done_testing
