#!/bin/bash
# Purpose: on a terminal weir redraws a status line (rates, total, fill bar, time,
# ratio, ETA with --size); -l copies messages to a file; -q keeps stderr quiet.
. "$(dirname "$0")/lib.sh"
command -v script >/dev/null || fail "script(1) is not installed (util-linux)"
gen "$TMP/in" 4000000 mixed
# script(1) gives weir a terminal on stderr; -r keeps it running for ~2 s
script -qfec "$WEIR -r 2M -z --size 4000000 -i $TMP/in -o /dev/null" "$TMP/tty" >/dev/null \
    || fail "weir under script exited $?"
tr '\r' '\n' <"$TMP/tty" >"$TMP/lines"
has_msg "$TMP/lines" "in " "status line shows the in rate"
has_msg "$TMP/lines" "out " "status line shows the out rate"
has_msg "$TMP/lines" "buf [" "status line shows the fill bar"
has_msg "$TMP/lines" "ratio " "status line shows the compression ratio"
has_msg "$TMP/lines" "ETA " "status line shows an ETA with --size"
has_msg "$TMP/lines" "summary: 3.81 MiB" "summary follows on the terminal"
[ "$(grep -c 'buf \[' "$TMP/lines")" -ge 2 ] || fail "the status line was drawn once only"
ok "the status line is redrawn"

"$WEIR" -q -i "$TMP/in" -o /dev/null 2>"$TMP/quiet" || fail "-q"
[ ! -s "$TMP/quiet" ] || fail "-q printed: $(cat "$TMP/quiet")"
ok "-q prints nothing on success"

"$WEIR" -l "$TMP/log" -i "$TMP/in" -o /dev/full 2>/dev/null
[ $? -eq 4 ] || fail "-o /dev/full with -l"
has_msg "$TMP/log" "weir: output /dev/full: write: No space left on device" "-l copies the error to the log file"
has_msg "$TMP/log" "summary: INCOMPLETE" "-l copies the summary"
expect 2 "-l into a missing directory" "$WEIR" -l "$TMP/no/such/dir/log" -i "$TMP/in" -o /dev/null
has_msg "$TMP/err" "log $TMP/no/such/dir/log: open: No such file or directory" "log file errors are named"
# a log file that cannot take a line (a full disk) is said so once; the
# transfer, whose data is whole, goes on and succeeds
expect 0 "-l on a full disk" "$WEIR" -l /dev/full -i "$TMP/in" -o "$TMP/out.full"
has_msg "$TMP/err" "weir: log file /dev/full: write: No space left on device; no more lines go there (the transfer goes on)" \
    "a log file that fails is named, with the cause"
[ "$(grep -c 'log file /dev/full' "$TMP/err")" -eq 1 ] || fail "the log file's failure said more than once"
ok "the log file's failure is said once"
same "$TMP/in" "$TMP/out.full" "the transfer beside a failed log file"
done_testing
