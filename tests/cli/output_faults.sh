#!/bin/bash
# Purpose: /dev/full and a downstream that quits early are output errors (exit 4),
# never success; existing files are refused without -f and left untouched.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 4000000 random
expect 4 "stdout is /dev/full" "$WEIR" <"$TMP/in" >/dev/full
has_msg "$TMP/err" "weir: output <stdout>: write: No space left on device" "message names stdout and ENOSPC"
has_msg "$TMP/err" "summary: INCOMPLETE" "summary says incomplete"

"$WEIR" -s 4k -m 64k <"$TMP/in" 2>"$TMP/err" | head -c 10 >/dev/null
st=${PIPESTATUS[0]}
[ "$st" -eq 4 ] || fail "downstream closed early: exit $st, want 4"
ok "downstream that quits early gives exit 4"
has_msg "$TMP/err" "Broken pipe" "message says Broken pipe"

echo original >"$TMP/exists"
expect 4 "an existing file is refused without -f" "$WEIR" -q -i "$TMP/in" -o "$TMP/exists"
has_msg "$TMP/err" "file exists (use -f to overwrite it)" "refusal says how to overwrite"
[ "$(cat "$TMP/exists")" = original ] || fail "refused file was modified"
ok "refused file left untouched"
"$WEIR" -q -f -i "$TMP/in" -o "$TMP/exists" || fail "-f"
same "$TMP/in" "$TMP/exists" "-f overwrites"
"$WEIR" -q -i "$TMP/in" -o /dev/null || fail "/dev/null is always allowed"
ok "/dev/null needs no -f"
expect 3 "missing input file" "$WEIR" -q -i "$TMP/nonexistent"
has_msg "$TMP/err" "input $TMP/nonexistent: open: No such file or directory" "input error names the file"
expect 3 "a directory as input" "$WEIR" -q -i "$TMP" -o /dev/null
has_msg "$TMP/err" "Is a directory" "read error reported"
done_testing
