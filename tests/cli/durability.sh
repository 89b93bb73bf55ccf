#!/bin/bash
# Purpose: success means the data is on stable storage: weir fdatasyncs regular
# file outputs (and fsyncs the directory of a file it created) before it exits 0
# or answers a sender, and a writeback error there is an output error (exit 4).
# --no-sync gives that promise up.
. "$(dirname "$0")/lib.sh"
: "${FAULTSHIM:?FAULTSHIM must name the fault shim}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
shim() { WEIR_FAULT=$1 LD_PRELOAD=$FAULTSHIM "${@:2}"; }
gen "$TMP/in" 200000 random

expect 0 "a plain copy" "$WEIR" -q -i "$TMP/in" -o "$TMP/a"
same "$TMP/in" "$TMP/a" "a plain copy"
expect 4 "fdatasync fails (EIO)" shim fdatasync_eio=1 "$WEIR" -q -i "$TMP/in" -o "$TMP/b"
has_msg "$TMP/err" "output $TMP/b: fdatasync (the data may not be on stable storage): Input/output error" \
    "fdatasync EIO: names the output and the cause"
expect 4 "fsync of the new file's directory fails" shim fsync_eio=1 "$WEIR" -q -i "$TMP/in" -o "$TMP/c"
has_msg "$TMP/err" "fsync of its directory" "directory fsync EIO: says so"
expect 0 "-f on an existing file does not need its directory synced" \
    shim fsync_eio=1 "$WEIR" -q -f -i "$TMP/in" -o "$TMP/a"
expect 4 "stdout redirected to a file is synced too" \
    bash -c "WEIR_FAULT=fdatasync_eio=1 LD_PRELOAD=$FAULTSHIM \"$WEIR\" -q -i \"$TMP/in\" >\"$TMP/d\""
expect 0 "--no-sync skips the flush" shim fdatasync_eio=1 "$WEIR" -q --no-sync -i "$TMP/in" -o "$TMP/e"
same "$TMP/in" "$TMP/e" "--no-sync still writes every byte"
expect 0 "a pipe output is not synced" bash -c "WEIR_FAULT=fdatasync_eio=1 LD_PRELOAD=$FAULTSHIM \"$WEIR\" -q -i \"$TMP/in\" | cat >/dev/null"

# the receiver answers only after the flush: its failure reaches the sender
rm -f "$TMP/err.l"
WEIR_FAULT=fdatasync_eio=1 LD_PRELOAD=$FAULTSHIM "$WEIR" -I 0 -o "$TMP/r" 2>"$TMP/rerr" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/rerr" "listening on" 10
LPORT=$(grep -o 'listening on .*' "$TMP/rerr" | grep -o '[0-9]*$')
expect 4 "sender whose receiver cannot flush" "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$LPORT"
has_msg "$TMP/err" "receiver: output $TMP/r: fdatasync" "the sender names the receiver's flush"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 4 ] || fail "receiver that cannot flush: exit $STATUS, want 4"
ok "receiver that cannot flush: exit 4"
done_testing
