#!/bin/bash
# fuzz.sh - run weir's libFuzzer targets with ASan and UBSan, then merge what
# they found into the committed corpora (tests/fuzz/corpus/*), minimized.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    (default 600, stream options sealed handshake stripe)
#
# A crash leaves crash-* files in tests/fuzz/ and makes this script fail; fix
# the bug, then copy the crash input into the corpus as a regression case.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(stream options sealed handshake stripe)
bash scripts/deps.sh
command -v clang >/dev/null || { echo "fuzz.sh: clang is required" >&2; exit 1; }
if [ ! -d build-fuzz ]; then
    CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C build-fuzz >/dev/null
for t in "${targets[@]}"; do
    corpus=tests/fuzz/corpus/$t
    work=build-fuzz/corpus-$t
    mkdir -p "$work"
    echo "fuzz.sh: fuzzing $t for $secs s"
    (cd tests/fuzz && ../../build-fuzz/tests/fuzz_"$t" -max_total_time="$secs" \
        -max_len=70000 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        "../../$work" "../../$corpus") 2>&1 | tail -n 12
    # add to the committed corpus only what covers something new
    build-fuzz/tests/fuzz_"$t" -merge=1 "$corpus" "$work" 2>&1 | tail -n 2
    echo "fuzz.sh: $t corpus now $(ls "$corpus" | wc -l) inputs"
done
