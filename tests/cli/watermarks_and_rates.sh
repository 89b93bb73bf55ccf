#!/bin/bash
# Purpose: -P holds writing back until the buffer is that full or input ends; -p
# resumes reading only below the mark; -r and -R limit the rate; a regular file
# is read at most --readahead ahead of a stalled output, unless -P asks for more.
. "$(dirname "$0")/lib.sh"
command -v lz4 >/dev/null || fail "lz4 is not installed (scripts/deps.sh installs it)"
# -P 90: a short input must not come out before the input ends
( echo "early"; while [ ! -e "$TMP/go" ]; do sleep 0.05; done; echo "late" ) \
    | "$WEIR" -q -P 90 -s 4k -m 64k >"$TMP/out" &
wpid=$!
PIDS+=("$wpid")
for i in $(seq 10); do sleep 0.05; done   # give a wrong implementation time to leak
[ -s "$TMP/out" ] && fail "-P 90 wrote before the buffer reached 90%"
ok "-P holds data back while the buffer is below the mark"
touch "$TMP/go"
wait_bounded "$wpid" 10
[ "$(cat "$TMP/out")" = "$(printf 'early\nlate')" ] || fail "-P output wrong: $(cat "$TMP/out")"
ok "-P writes everything once input ends"

gen "$TMP/in" 4000000 random
"$WEIR" -q -P 50 -p 20 -s 16k -m 256k <"$TMP/in" | "$TESTTOOL" slowread 20000000 >"$TMP/out2"
same "$TMP/in" "$TMP/out2" "-P 50 -p 20 with a slow consumer"

gen "$TMP/in3" 2000000 random
for opt in -r -R; do
    start=$(date +%s%N)
    "$WEIR" -q $opt 2M <"$TMP/in3" >"$TMP/out3" || fail "$opt"
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    same "$TMP/in3" "$TMP/out3" "$opt 2M keeps the data"
    [ "$ms" -ge 700 ] || fail "$opt 2M moved 2 MB in $ms ms"
    ok "$opt 2M takes about a second for 2 MB ($ms ms)"
done
# --readahead: the output is a FIFO nobody reads; weir's offset in its input file
# must stop near the window (4 MiB + the FIFO's 1 MiB + a block in hand), while
# with a window as large as the buffer, or with -P, it reads on.
input_pos() {   # input_pos PID FILE: weir's offset in FILE; its size once closed
    local fd
    for fd in /proc/"$1"/fd/*; do
        if [ "$(readlink "$fd")" = "$2" ]; then
            awk '/^pos:/ {print $2}' /proc/"$1"/fdinfo/"${fd##*/}"
            return
        fi
    done
    stat -c %s "$2"
}
gen "$TMP/big" 40000000 random
mkfifo "$TMP/fifo"
exec 8<>"$TMP/fifo"    # a reader that never reads
for opts in "--readahead 4M" "--readahead 512M" "-P 10 --readahead 4M"; do
    "$WEIR" -q $opts -i "$TMP/big" -o "$TMP/fifo" &
    wpid=$!
    PIDS+=("$wpid")
    if [ "$opts" = "--readahead 4M" ]; then
        i=0
        until [ "$(input_pos "$wpid" "$TMP/big")" -ge 4194304 ]; do
            i=$((i + 1)); [ "$i" -gt 200 ] && fail "$opts: weir did not read 4 MiB in 10 s"
            sleep 0.05
        done
        for i in $(seq 10); do   # give a wrong implementation time to read on
            sleep 0.05
            pos=$(input_pos "$wpid" "$TMP/big")
            [ "$pos" -le $((7 << 20)) ] || fail "$opts: read $pos bytes ahead of a stalled output"
        done
        ok "--readahead 4M: a stalled output holds the file's reader near 4 MiB ($pos)"
    else
        i=0   # the whole file in the buffer: weir's memory holds it
        until [ "$(awk '/^VmRSS/ {print $2}' /proc/"$wpid"/status)" -ge 36000 ]; do
            i=$((i + 1)); [ "$i" -gt 200 ] && fail "$opts: weir did not take the whole file"
            sleep 0.05
        done
        ok "$opts: the buffer takes the whole file while the output stalls"
    fi
    kill "$wpid"
    wait "$wpid" 2>/dev/null
done
exec 8<&-
gen "$TMP/mix" 30000000 mixed
"$WEIR" -q -z -T 3 --readahead 1 -i "$TMP/mix" | "$WEIR" -q -d -T 3 >"$TMP/out4" \
    || fail "-z -T 3 with the smallest --readahead"
same "$TMP/mix" "$TMP/out4" "-z -T 3 with --readahead 1 still has the blocks its workers need"
{ lz4 -q -B4 -BX -c "$TMP/mix"; lz4 -q -c "$TMP/mix"; } >"$TMP/mix.lz4"
cat "$TMP/mix" "$TMP/mix" >"$TMP/mix2"
"$WEIR" -q -d -T 3 --readahead 1 -i "$TMP/mix.lz4" | "$TESTTOOL" slowread 100000000 >"$TMP/out5"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "-d -T 3 --readahead 1 exited ${PIPESTATUS[0]}"
same "$TMP/mix2" "$TMP/out5" "-d -T 3 of .lz4 frames with --readahead 1 and a slow consumer"
done_testing
