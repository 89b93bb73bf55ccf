#!/bin/bash
# Purpose: -z | -d round trips at awkward sizes and kinds of data; stock lz4 decodes
# weir -z output, and weir -d decodes what lz4 makes (linked blocks, no checksums,
# concatenated and skippable frames included) and concatenated weir streams.
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
gen "$TMP/in" "$(sized 9000011 3000011)" random
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
"$WEIR" -q -z </dev/null | lz4 -dc >"$TMP/empty.out" || fail "lz4 -d of empty weir -z output"
[ ! -s "$TMP/empty.out" ] || fail "empty input decoded to bytes"
ok "stock lz4 -d decodes weir -z of empty input"
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
# frames of every kind in one input: linked blocks (decoded in order), 64 KiB
# independent blocks with block checksums, a content size (split into blocks
# and decoded in parallel); with 1-3 workers and a buffer of a few blocks
# behind a slow consumer, so the in-order content check holds blocks back
gen "$TMP/c" 3000000 mixed
{ lz4 -q -BD -c "$TMP/a"; lz4 -q -B4 -BX -c "$TMP/mix"; lz4 -q -BD -B5 -c "$TMP/b";
  lz4 -q --content-size -c "$TMP/c"; } >"$TMP/kinds.lz4"
cat "$TMP/a" "$TMP/mix" "$TMP/b" "$TMP/c" >"$TMP/kinds"
for T in 1 2 3; do
    "$WEIR" -q -d -T $T -m 2M -i "$TMP/kinds.lz4" | "$TESTTOOL" slowread 40000000 >"$TMP/out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || fail "-d -T $T of mixed kinds of frames exited ${PIPESTATUS[0]}"
    same "$TMP/kinds" "$TMP/out" "weir -d -T $T decodes linked, checksummed and sized frames in one input"
done
{ "$WEIR" -q -z <"$TMP/a"; "$WEIR" -q -z <"$TMP/b"; } >"$TMP/cat.z"
"$WEIR" -q -d -i "$TMP/cat.z" -f -o "$TMP/out" || fail "concatenated weir -z output"
same "$TMP/ab" "$TMP/out" "weir -d decodes concatenated weir -z output"
weir_stream "$TMP/a" "$TMP/a.weir" -z -s 64k
weir_stream "$TMP/b" "$TMP/b.weir" -z
cat "$TMP/a.weir" "$TMP/b.weir" >"$TMP/cat.weir"
"$WEIR" -q -d -i "$TMP/cat.weir" -f -o "$TMP/out" || fail "concatenated weir streams"
same "$TMP/ab" "$TMP/out" "weir -d decodes concatenated weir streams"
done_testing
