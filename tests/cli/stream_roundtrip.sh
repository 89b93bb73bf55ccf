#!/bin/bash
# Purpose: -z | -d round trips at awkward sizes and kinds of data; stock lz4 decodes
# weir -z output, and weir -d decodes what lz4 makes (linked blocks, no checksums,
# concatenated and skippable frames included).
. "$(dirname "$0")/lib.sh"
command -v lz4 >/dev/null || fail "lz4 is not installed (scripts/deps.sh installs it)"
B=65536
for kind in random zero mixed; do
    for n in 0 1 $((B - 1)) $B $((B + 1)) 9000011; do
        gen "$TMP/in" "$n" "$kind"
        "$WEIR" -q -z -s 64k <"$TMP/in" >"$TMP/z" || fail "-z exited $?"
        "$WEIR" -q -d <"$TMP/z" >"$TMP/out" || fail "-d exited $? ($kind, $n bytes)"
        same "$TMP/in" "$TMP/out" "-z | -d, $kind, $n bytes"
    done
done
gen "$TMP/in" 9000011 random
"$WEIR" -q -z <"$TMP/in" >"$TMP/z"
[ "$(stat -c %s "$TMP/z")" -le $((9000011 + 9000011 / 200)) ] || fail "random data grew more than 0.5%"
ok "incompressible data grows by less than 0.5%"
for T in 1 2 3; do
    "$WEIR" -q -z -T $T -s 256k -i "$TMP/in" -f -o "$TMP/zt" || fail "-T $T"
    "$WEIR" -q -d -T $T -i "$TMP/zt" -f -o "$TMP/outt" || fail "-d -T $T"
    same "$TMP/in" "$TMP/outt" "-z -T $T then -d -T $T"
done
# long enough (about 1.5 s) for the main thread to trim cold blocks meanwhile
gen "$TMP/long" 30000000 mixed
"$WEIR" -q -z -s 256k <"$TMP/long" | "$TESTTOOL" slowread 20000000 >"$TMP/long.z" || fail "-z long"
"$WEIR" -q -d <"$TMP/long.z" >"$TMP/out" || fail "-d long"
same "$TMP/long" "$TMP/out" "-z while cold blocks are trimmed decodes to the original"
gen "$TMP/mix" 6000000 mixed
"$WEIR" -q --compress=9 <"$TMP/mix" >"$TMP/hc" || fail "--compress=9"
"$WEIR" -q -d <"$TMP/hc" >"$TMP/out" || fail "-d of LZ4HC"
same "$TMP/mix" "$TMP/out" "--compress=9 (LZ4HC) round trip"

"$WEIR" -q -z <"$TMP/mix" | lz4 -dc >"$TMP/out" || fail "lz4 -d of weir -z"
same "$TMP/mix" "$TMP/out" "stock lz4 -d decodes weir -z"
"$WEIR" -q -z </dev/null | lz4 -dc >"$TMP/empty.out" || fail "lz4 -d of an empty weir stream"
[ ! -s "$TMP/empty.out" ] || fail "empty stream decoded to bytes"
ok "stock lz4 -d decodes an empty weir stream"
for opts in "-1" "-9" "-BD" "--no-frame-crc" "-BX" "-B4" "--content-size"; do
    lz4 -q $opts -c "$TMP/mix" >"$TMP/x.lz4" || fail "lz4 $opts"
    "$WEIR" -q -d <"$TMP/x.lz4" >"$TMP/out" || fail "weir -d of lz4 $opts exited $?"
    same "$TMP/mix" "$TMP/out" "weir -d decodes lz4 $opts"
done
gen "$TMP/a" 100000 text
gen "$TMP/b" 70000 random
{ lz4 -q -c "$TMP/a"; printf '\x50\x2a\x4d\x18\x05\x00\x00\x00hello'; lz4 -q -c "$TMP/b"; } >"$TMP/cat.lz4"
cat "$TMP/a" "$TMP/b" >"$TMP/ab"
"$WEIR" -q -d -i "$TMP/cat.lz4" -f -o "$TMP/out" || fail "concatenated frames"
same "$TMP/ab" "$TMP/out" "weir -d decodes concatenated and skippable frames"
{ "$WEIR" -q -z <"$TMP/a"; "$WEIR" -q -z <"$TMP/b"; } >"$TMP/cat.weir"
"$WEIR" -q -d -i "$TMP/cat.weir" -f -o "$TMP/out" || fail "concatenated weir streams"
same "$TMP/ab" "$TMP/out" "weir -d decodes concatenated weir streams"
done_testing
