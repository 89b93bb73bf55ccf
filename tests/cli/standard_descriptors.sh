#!/bin/bash
# Purpose: a closed stdin, stdout or stderr never lets messages into the data or
# data into a log: weir fills descriptors 0-2 before opening anything, and a
# closed one used as the input or an output is an error (3 or 4), not an empty
# input or a silent sink.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 300000 random

# a listener with stderr closed: its messages must not land in its output
"$WEIR" -I 0 -l "$TMP/rlog" -o "$TMP/out" 2>&- &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/rlog" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/rlog" | grep -o '[0-9]*$')
expect 0 "sender to a listener whose stderr is closed" "$WEIR" -q -O "127.0.0.1:$port" -i "$TMP/in"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "listener with stderr closed: exit $STATUS"
same "$TMP/in" "$TMP/out" "listener with stderr closed: output holds only the data"

# the status line asked for with SIGUSR1 must not land in -o when stderr is closed
"$WEIR" -R 2M -i "$TMP/in" -o "$TMP/out2" 2>&- &
pid=$!
PIDS+=("$pid")
wait_size "$TMP/out2" 0 10
kill -USR1 "$pid"
wait_bounded "$pid" 20
[ "$STATUS" -eq 0 ] || fail "-R 2M with stderr closed: exit $STATUS"
same "$TMP/in" "$TMP/out2" "SIGUSR1 with stderr closed: output holds only the data"

# stdout closed: the data must not go into the -l file, and weir fails
"$WEIR" -l "$TMP/log" <"$TMP/in" >&- 2>"$TMP/err"
st=$?
[ "$st" -eq 4 ] || fail "weir -l log >&-: exit $st, want 4"
has_msg "$TMP/err" "output <stdout>: standard output is closed" "weir -l log >&-: says stdout is closed"
[ "$(stat -c %s "$TMP/log")" -lt 1000 ] || fail "weir -l log >&-: the data went into the log"
ok "weir -l log >&-: the log holds no data"

expect 4 "weir <in >&-" "$WEIR" -q <"$TMP/in" >&-
has_msg "$TMP/err" "standard output is closed" "weir <in >&-: names stdout"
expect 4 "weir -o - <in >&-" "$WEIR" -q -o - <"$TMP/in" >&-
expect 3 "weir <&- >out" "$WEIR" -q -o "$TMP/out3" <&-
has_msg "$TMP/err" "input <stdin>: standard input is closed" "weir <&-: names stdin"
[ -e "$TMP/out3" ] && fail "weir <&- -o out: a failed start left out behind"
ok "weir <&- -o out: no output file left behind"
expect 4 "weir -h >&-" "$WEIR" -h >&-

# a consumer gets standard output as weir got it: closed, as a shell leaves
# it, so a consumer that writes there fails instead of writing into the
# /dev/null weir holds in its place; one that does not write there is fine
expect 4 "weir -i in -- cat >&-" "$WEIR" -q -i "$TMP/in" -- cat >&-
has_msg "$TMP/err" "consumer 'cat' exited with status 1" "weir -i in -- cat >&-: the consumer's failure"
expect 0 "weir -i in -- sh -c 'cat >out' >&-" "$WEIR" -q -i "$TMP/in" -- sh -c 'cat >"$1"' sh "$TMP/out5" >&-
same "$TMP/in" "$TMP/out5" "a consumer that does not write to the closed stdout"

# closed stdin is fine when it is not the input; closed stderr is fine
expect 0 "weir -i in -o out <&- 2>&-" "$WEIR" -i "$TMP/in" -o "$TMP/out4" <&- 2>&-
same "$TMP/in" "$TMP/out4" "-i with stdin and stderr closed"
# the same descriptors named by path (/dev/stdin, /dev/fd/N, /proc/self/fd/N,
# a link to one): they lead to the /dev/null put in place of the closed one,
# and used to read as an empty input or swallow the data, with exit 0
ln -s /dev/stdin "$TMP/to-stdin"
for path in /dev/stdin /dev/fd/0 /proc/self/fd/0 "$TMP/to-stdin"; do
    rm -f "$TMP/o"
    expect 3 "-i $path <&-" "$WEIR" -q -i "$path" -o "$TMP/o" <&-
    has_msg "$TMP/err" "input $path: it is standard input, which is closed" "-i $path <&-: says so"
    [ ! -s "$TMP/o" ] || fail "-i $path <&-: wrote something"
done
listen "$TMP/lout" "$TMP/lerr" -q --reconnect 0
expect 3 "-i /dev/stdin -O HOST <&-" "$WEIR" -q -i /dev/stdin -O "127.0.0.1:$LPORT" <&-
kill "$LPID" 2>/dev/null
for path in /dev/stdout /dev/fd/1 /proc/self/fd/1; do
    expect 4 "-o $path >&-" "$WEIR" -q -f -i "$TMP/in" -o "$path" >&-
    has_msg "$TMP/err" "output $path: it is standard output, which is closed" "-o $path >&-: says so"
done
expect 0 "-i /dev/stdin, standard input open" "$WEIR" -q -i /dev/stdin -o "$TMP/o2" <"$TMP/in"
same "$TMP/in" "$TMP/o2" "-i /dev/stdin with standard input open: read as it is"
expect 0 "-i /dev/null <&-: /dev/null named as such is an empty input" \
    "$WEIR" -q -i /dev/null -o "$TMP/o3" <&-

done_testing
