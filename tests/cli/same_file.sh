#!/bin/bash
# Purpose: weir refuses (exit 2, "are the same file") to write the file it reads,
# through a path, a symlink, a hard link, standard input or output, or the -l
# file, and never truncates it; /dev/null and other character devices are
# exempt.  A start that fails leaves no output file behind.
. "$(dirname "$0")/lib.sh"
gen "$TMP/f" 100000 random
cp "$TMP/f" "$TMP/orig"
ln -s "$TMP/f" "$TMP/sym"
ln "$TMP/f" "$TMP/hard"
refused() {   # refused LABEL CMD...
    local label=$1
    shift
    expect 2 "$label" "$@"
    has_msg "$TMP/err" "are the same file" "$label: says why"
    same "$TMP/orig" "$TMP/f" "$label: the file is untouched"
}
refused "-i f -o f -f" "$WEIR" -q -i "$TMP/f" -o "$TMP/f" -f
refused "-i sym -o f -f" "$WEIR" -q -i "$TMP/sym" -o "$TMP/f" -f
refused "-i hard -o f -f" "$WEIR" -q -i "$TMP/hard" -o "$TMP/f" -f
refused "-i f >> f" bash -c '"$0" -q -i "$1" >>"$1"' "$WEIR" "$TMP/f"
refused "< f >> f" bash -c '"$0" -q <"$1" >>"$1"' "$WEIR" "$TMP/f"
refused "-i f -o /dev/null -o sym -f" "$WEIR" -q -i "$TMP/f" -o /dev/null -o "$TMP/sym" -f
refused "-i f -l f" "$WEIR" -q -i "$TMP/f" -l "$TMP/f" -o /dev/null
gen "$TMP/in" 5000 text
refused "-l f -o f -f" "$WEIR" -q -i "$TMP/in" -l "$TMP/f" -o "$TMP/f" -f
refused "-l f >> f" bash -c '"$0" -q -i "$2" -l "$1" >>"$1"' "$WEIR" "$TMP/f" "$TMP/in"

expect 2 "-o a -o a" "$WEIR" -q -i "$TMP/in" -o "$TMP/a" -o "$TMP/a"
has_msg "$TMP/err" "are the same file" "-o a -o a: says they are one file"
[ -e "$TMP/a" ] && fail "-o a -o a: left a behind"
ok "-o a -o a: leaves no file behind"
expect 2 "-o a -o ./a -f" "$WEIR" -q -i "$TMP/in" -o "$TMP/a" -o "$TMP/./a" -f
[ -e "$TMP/a" ] && fail "-o a -o ./a: left a behind"
ok "-o a -o ./a -f: leaves no file behind"

# character devices are not files that reading and writing could clobber
expect 0 "-o /dev/null twice" "$WEIR" -q -i "$TMP/in" -o /dev/null -o /dev/null
expect 0 "-i /dev/zero -o /dev/zero" bash -c "head -c 1000 /dev/zero | \"$WEIR\" -q -o /dev/null"

# a start that fails later leaves no empty output behind, so a retry works
expect 3 "-i missing -o out" "$WEIR" -q -i "$TMP/missing" -o "$TMP/out"
[ -e "$TMP/out" ] && fail "-i missing: left out behind"
ok "-i missing: no output file left behind"
rm -f "$TMP/l1"   # never read a previous listener's port
"$WEIR" -I 0 -o /dev/null 2>"$TMP/l1" &
PIDS+=($!)
wait_for "$TMP/l1" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/l1" | grep -o '[0-9]*$')
expect 5 "-I on a port in use -o out" "$WEIR" -q -I "$port" -o "$TMP/out"
[ -e "$TMP/out" ] && fail "-I on a busy port: left out behind"
ok "-I on a busy port: no output file left behind"
expect 4 "-o ok -o /nonexistent/x" "$WEIR" -q -i "$TMP/in" -o "$TMP/ok" -o /nonexistent/x
[ -e "$TMP/ok" ] && fail "a failed second -o left the first behind"
ok "a failed second -o: the first is removed too"
expect 0 "retry after the failed start" "$WEIR" -q -i "$TMP/in" -o "$TMP/ok"
same "$TMP/in" "$TMP/ok" "the retry writes the file"
# failures after the start that wrote nothing leave nothing either
expect 5 "-I --accept-timeout -o n1" "$WEIR" -q -I 0 --accept-timeout 0.5 -o "$TMP/n1"
[ -e "$TMP/n1" ] && fail "a listener that timed out left its output behind"
ok "a listener that timed out leaves no output file"
expect 6 "-d of an empty input -o n2" "$WEIR" -q -d -i /dev/null -o "$TMP/n2"
[ -e "$TMP/n2" ] && fail "an empty stream left its output behind"
ok "a decode that failed at once leaves no output file"
# the -l file is checked even when it created the output's name itself
expect 2 "-o x -l x" "$WEIR" -q -i "$TMP/in" -o "$TMP/x" -l "$TMP/x"
has_msg "$TMP/err" "are the same file" "-o x -l x: the same file, not 'file exists'"
done_testing
