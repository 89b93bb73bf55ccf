#!/bin/bash
# Purpose: -P holds writing back until the buffer is that full or input ends; -p
# resumes reading only below the mark; -r and -R limit the rate; --size gives ETA.
. "$(dirname "$0")/lib.sh"
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
done_testing
