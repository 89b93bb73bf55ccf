#!/bin/bash
# Purpose: weir -d catches, in a weir stream (recorded between two weirs) and in
# plain LZ4 frames, truncation at every kind of offset, a flipped byte in the
# header, a block, a checksum and the trailer, junk after the end, an over-long
# block and empty input, all with exit 6 and a message giving the byte.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 300000 mixed
weir_stream "$TMP/in" "$TMP/z" -z -s 64k
ws=$TMP/ws.z; cp "$TMP/z" "$ws"
len=$(stat -c %s "$TMP/z")
first=$(( $(od -An -tu4 -j 31 -N 4 "$TMP/z") & 0x7fffffff ))   # first block's size
b1=$((24 + 11 + first + 36))                                       # end of block 0

decode_fails() {   # decode_fails FILE LABEL TEXT
    "$WEIR" -q -d <"$1" >"$TMP/out" 2>"$TMP/err"
    local st=$?
    [ "$st" -eq 6 ] || { cat "$TMP/err"; fail "$2: exit $st, want 6"; }
    grep -qF -- "$3" "$TMP/err" || { cat "$TMP/err"; fail "$2: no '$3'"; }
    grep -q "at byte [0-9]" "$TMP/err" || grep -q "empty input" "$TMP/err" \
        || { cat "$TMP/err"; fail "$2: no byte offset"; }
    ok "$2: exit 6, '$3'"
}
: >"$TMP/empty"
decode_fails "$TMP/empty" "empty input" "empty input"
for cut in 1 10 23 24 28 34 35 $((35 + first / 2)) $((b1 - 20)) $((b1 - 1)) $b1 $((b1 + 3)) \
           $((len - 40)) $((len - 20)) $((len - 1)); do
    head -c "$cut" "$TMP/z" >"$TMP/t"
    decode_fails "$TMP/t" "truncated at $cut of $len" "truncated"
done
flip() {   # flip OFFSET -> $TMP/f
    cp "$TMP/z" "$TMP/f"
    local byte
    byte=$(od -An -tu1 -j "$1" -N 1 "$TMP/z")
    printf "$(printf '\\%03o' $(( (byte ^ 1) & 255 )))" \
        | dd of="$TMP/f" bs=1 seek="$1" conv=notrunc status=none
}
flip 9; decode_fails "$TMP/f" "flipped header byte" "malformed weir header"
flip 14; decode_fails "$TMP/f" "flipped header flag" "header says its blocks are stored"
flip 17; decode_fails "$TMP/f" "flipped header block size" "differs from the stream header's"
flip 13; decode_fails "$TMP/f" "flipped version byte" "version"
flip $((35 + 100)); decode_fails "$TMP/f" "flipped block byte" "corrupt data"
flip $((b1 - 5)); decode_fails "$TMP/f" "flipped checksum byte" "checksum mismatch"
flip $((b1 - 15)); decode_fails "$TMP/f" "flipped sequence number" "block 256 arrived where block 0 belongs"
flip $((len - 10)); decode_fails "$TMP/f" "flipped trailer byte" "trailer does not match"
flip $((len - 30)); decode_fails "$TMP/f" "flipped trailer padding" "malformed weir trailer"
flip 26; decode_fails "$TMP/f" "flipped frame magic" "no frame starts here"
cat "$TMP/z" >"$TMP/j"; printf 'x' >>"$TMP/j"
decode_fails "$TMP/j" "one byte of junk after the end" "junk after the end"
cat "$TMP/z" "$TMP/z" | head -c $((len + 10)) >"$TMP/j2"
decode_fails "$TMP/j2" "a second stream cut short" "truncated"
# a block that claims more than the header's maximum (64 KiB)
cp "$TMP/z" "$TMP/big"
printf '\x00\x00\x02\x00' | dd of="$TMP/big" bs=1 seek=31 conv=notrunc status=none
decode_fails "$TMP/big" "a block longer than the maximum" "exceeds the maximum"
printf 'plain text, not a stream' >"$TMP/plain"
decode_fails "$TMP/plain" "input that is not a stream" "not a weir stream, LZ4 or zstd data"
lz4 -q -c "$TMP/in" | head -c 5000 >"$TMP/t.lz4"
decode_fails "$TMP/t.lz4" "truncated lz4 file" "truncated LZ4 data"

# plain LZ4 frames split into blocks: header, block, block checksum, content
# checksum, block size and what follows the frame are all checked
lz4 -q -B4 -c "$TMP/in" >"$TMP/z"              # 64 KiB blocks, content checksum
len=$(stat -c %s "$TMP/z")
flip 4; decode_fails "$TMP/f" "lz4: flipped frame flags" "LZ4 frame"
flip 6; decode_fails "$TMP/f" "lz4: flipped header checksum" "corrupt LZ4 frame header"
flip 500; decode_fails "$TMP/f" "lz4: flipped byte in a block" "corrupt data"
flip $((len - 2)); decode_fails "$TMP/f" "lz4: flipped content checksum" "content checksum mismatch"
flip $((len - 6)); decode_fails "$TMP/f" "lz4: flipped end mark" "LZ4"
cp "$TMP/z" "$TMP/big"
printf '\x00\x00\x02\x00' | dd of="$TMP/big" bs=1 seek=7 conv=notrunc status=none
decode_fails "$TMP/big" "lz4: a block longer than the frame's maximum" "exceeds the frame's maximum"
cat "$TMP/z" >"$TMP/j"; printf 'junk' >>"$TMP/j"
decode_fails "$TMP/j" "lz4: junk after the frame" "no frame starts here"
for cut in 4 6 9 500 $((len - 5)) $((len - 1)); do
    head -c "$cut" "$TMP/z" >"$TMP/t"
    decode_fails "$TMP/t" "lz4: truncated at $cut of $len" "truncated LZ4 data"
done
# a weir stream is never decoded without its checks: not with its header cut
# off (its frames alone look like LZ4 data), nor after an LZ4 frame
tail -c +25 "$ws" >"$TMP/headless"
decode_fails "$TMP/headless" "weir stream without its header" "without its header"
{ lz4 -q -c "$TMP/in"; cat "$ws"; } >"$TMP/lz4weir"
decode_fails "$TMP/lz4weir" "weir stream after an lz4 frame" "a weir stream follows LZ4 data"
lz4 -q -B4 -BX -c "$TMP/in" >"$TMP/z"          # with block checksums
flip 500; decode_fails "$TMP/f" "lz4 -BX: flipped byte in a block" "corrupt data"
last=$(( $(od -An -tu4 -j 7 -N 4 "$TMP/z") & 0x7fffffff ))
flip $((11 + last + 1)); decode_fails "$TMP/f" "lz4 -BX: flipped block checksum" "LZ4 block 0 at byte 11: checksum mismatch"
done_testing
