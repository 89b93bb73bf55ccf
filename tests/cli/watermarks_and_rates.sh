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
start=$(date +%s%N)
"$WEIR" -q -r 2M <"$TMP/in3" >"$TMP/out3" || fail "-r"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
same "$TMP/in3" "$TMP/out3" "-r 2M keeps the data"
[ "$ms" -ge 700 ] || fail "-r 2M moved 2 MB in $ms ms"
ok "-r 2M takes about a second for 2 MB ($ms ms)"
start=$(date +%s%N)
"$WEIR" -q -R 2M <"$TMP/in3" >"$TMP/out4" || fail "-R"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
same "$TMP/in3" "$TMP/out4" "-R 2M keeps the data"
[ "$ms" -ge 700 ] || fail "-R 2M moved 2 MB in $ms ms"
ok "-R 2M takes about a second for 2 MB ($ms ms)"
done_testing
