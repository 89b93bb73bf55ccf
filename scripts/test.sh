#!/bin/bash
# test.sh - build weir and run its whole test suite.  The last line it prints
# is "N passed, M failed"; it exits non-zero if anything failed.
#
#   scripts/test.sh           release build and the Debian package, the portable
#                             (POSIX) build, then ASan+UBSan, TSan, valgrind and
#                             the macOS cross-compile
#   scripts/test.sh --quick   release build only
#
# It installs missing build dependencies first (scripts/deps.sh).
set -u
cd "$(dirname "$0")/.."
quick=false
[ "${1:-}" = "--quick" ] && quick=true
passed=0
failed=0
skipped_checks=0
# extra arguments of meson test for the next suite
test_args=()

if ! bash scripts/deps.sh; then
    echo "test.sh: could not install the build dependencies"
    echo "0 passed, 1 failed"
    exit 1
fi

# suite NAME BUILDDIR TIMEOUT_MULTIPLIER MESON_SETUP_ARGS...
suite() {
    local name=$1 dir=$2 mult=$3
    shift 3
    echo "=== $name"
    if [ ! -f "$dir/build.ninja" ] && ! meson setup "$dir" "$@" >"$dir.setup.log" 2>&1; then
        cat "$dir.setup.log"
        echo "test.sh: $name: meson setup failed"
        failed=$((failed + 1))
        return
    fi
    if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
        tail -n 30 "$dir.build.log"
        echo "test.sh: $name: build failed"
        failed=$((failed + 1))
        return
    fi
    if grep -q "warning:" "$dir.build.log"; then
        grep "warning:" "$dir.build.log"
        echo "test.sh: $name: the build has warnings"
        failed=$((failed + 1))
    fi
    rm -f "$dir/meson-logs/testlog.json"
    # the package test runs once, on its own (package_test)
    meson test -C "$dir" --no-suite package "${test_args[@]}" --print-errorlogs --timeout-multiplier "$mult" 2>&1 \
        | grep -E "^ *[0-9]+/[0-9]+ |^(FAIL|ok|#)|^---|^>>>|error|ERROR|Sanitizer" | grep -v '^ok '
    local ok bad
    ok=$(grep -c '"result": "OK"' "$dir/meson-logs/testlog.json" 2>/dev/null)
    bad=$(grep -c '"result": "\(FAIL\|TIMEOUT\|ERROR\|UNEXPECTEDPASS\)"' \
          "$dir/meson-logs/testlog.json" 2>/dev/null)
    skipped=$(grep -c '"result": "SKIP"' "$dir/meson-logs/testlog.json" 2>/dev/null)
    [ -n "$ok" ] || ok=0
    [ -n "$bad" ] || bad=1
    if [ "$ok" -eq 0 ]; then
        echo "test.sh: $name: no test ran"
        bad=$((bad + 1))
    fi
    # a skipped test is not a pass
    bad=$((bad + ${skipped:-0}))
    # checks that need Linux, skipped by the POSIX build (tests/cli/lib.sh on_linux)
    local platform_skips
    platform_skips=$(grep -a -c '^# skip (needs Linux)' "$dir/meson-logs/testlog.txt" 2>/dev/null)
    platform_skips=${platform_skips:-0}
    skipped_checks=$((skipped_checks + platform_skips))
    echo "=== $name: $ok passed, $bad failed, $platform_skips checks skipped (need Linux)"
    passed=$((passed + ok))
    failed=$((failed + bad))
}

# package_test: tests/cli/package.sh, with WEIR_TEST_PACKAGE=1, once, from
# the release build: dpkg-buildpackage, the .deb's files, lintian, the
# completions.  One test: it adds 1 to passed or to failed (a SKIP fails).
package_test() {
    echo "=== package (dpkg-buildpackage, lintian, completions)"
    rm -f build/meson-logs/testlog.json
    WEIR_TEST_PACKAGE=1 meson test -C build --suite package --print-errorlogs 2>&1 \
        | grep -E "^ *[0-9]+/[0-9]+ |^(FAIL|#)|^---|^>>>"
    if grep -q '"result": "OK"' build/meson-logs/testlog.json 2>/dev/null; then
        passed=$((passed + 1))
    else
        echo "test.sh: package: the Debian package failed a check (build/meson-logs/testlog.txt)"
        failed=$((failed + 1))
    fi
}

# vg_encrypted DIR SENDER_OPTIONS...: an encrypted loopback round trip of
# DIR/in into DIR/out, both ends under valgrind; the listener's port comes
# from its log, and its wait is bounded
vg_encrypted() {
    local dir=$1 port="" i
    shift
    local opts=("$@")
    local vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite)
    "${vg[@]}" build/weir -q --key-file "$dir/key" -I 127.0.0.1:0 -o "$dir/out" \
        2>"$dir/l.err" &
    local lpid=$!
    for i in $(seq 600); do
        port=$(grep -o 'listening on .*' "$dir/l.err" 2>/dev/null | grep -o '[0-9]*$')
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { kill "$lpid"; wait "$lpid"; cat "$dir/l.err"; return 1; }
    "${vg[@]}" build/weir -q "${opts[@]}" --key-file "$dir/key" -O "127.0.0.1:$port" \
        -i "$dir/in" \
        || { kill "$lpid"; wait "$lpid"; return 1; }
    wait "$lpid" || { cat "$dir/l.err"; return 1; }
}

# valgrind over a few round trips of the release build
valgrind_pass() {
    echo "=== valgrind"
    local vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite)
    local tmp
    tmp=$(mktemp -d)
    { head -c 1500000 /dev/urandom; yes "weir under valgrind" | head -c 1500000; } >"$tmp/in"
    local cases=(
        "pass-through|build/weir -q -s 64k <$tmp/in >$tmp/out"
        "compress|build/weir -q -z -T 2 -s 64k <$tmp/in >$tmp/z && cp $tmp/in $tmp/out"
        "decode|build/weir -q -d -T 2 <$tmp/z >$tmp/out"
        "tiny buffer|build/weir -q -s 1k -m 4k <$tmp/in >$tmp/out"
        "lz4 decode|lz4 -q -B4 -BX -c $tmp/in >$tmp/in.lz4 && build/weir -q -d -T 2 <$tmp/in.lz4 >$tmp/out"
        "zstd|build/weir -q --zstd -T 2 -s 64k --sparse <$tmp/in >$tmp/in.zst && build/weir -q -d -T 2 <$tmp/in.zst >$tmp/out"
        "zstd decode|zstd -q -c $tmp/in >$tmp/plain.zst && build/weir -q -d <$tmp/plain.zst >$tmp/out"
        "producer and consumer|build/weir -q -z -- cat $tmp/in | build/weir -q -d -i - -- sh -c 'cat >$tmp/out'"
        "encrypted over TCP|encrypted -z"
        "encrypted over TCP, two workers|encrypted -T2"
        "encrypted zstd over TCP|encrypted --zstd"
        "encrypted over three connections|encrypted --streams 3 -z"
    )
    build/weir -q --genkey "$tmp/key" --key-id valgrind || failed=$((failed + 1))
    for c in "${cases[@]}"; do
        local label=${c%%|*} cmd=${c#*|}
        cmd=${cmd//build\/weir/${vg[*]} build/weir}
        rm -f "$tmp/out"
        if [ "${cmd%% *}" = encrypted ]; then
            # a keyed listener and sender, both under valgrind
            cmd="vg_encrypted $tmp ${cmd#encrypted }"
        fi
        if eval "$cmd" && cmp -s "$tmp/in" "$tmp/out"; then
            echo "valgrind $label: ok"
            passed=$((passed + 1))
        else
            echo "valgrind $label: FAILED"
            failed=$((failed + 1))
        fi
    done
    rm -rf "$tmp"
}

suite release build 1 -Dbuildtype=release
if ! $quick; then
    package_test
    # the path of FreeBSD, illumos and macOS, proved here (src/os/posix.c)
    # (streams_join_hostile attacks through the fault shim's long path and
    # the SYN's mark, which the portable path has not: Linux only)
    test_args=(--no-suite linux-only)
    suite posix build-posix 1 -Dbuildtype=release -Dplatform=posix
    test_args=()
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    suite "asan+ubsan" build-asan 4 -Dbuildtype=debugoptimized \
        -Db_sanitize=address,undefined -Db_lundef=false
    # a test that runs one thread gives TSan nothing to watch (test_stream:
    # four minutes of the codec alone); it runs in every other suite
    test_args=(--no-suite one-thread)
    suite tsan build-tsan 6 -Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false
    test_args=()
    valgrind_pass
    # every source file compiles for macOS, implicit declarations as errors
    echo "=== cross (zig cc, x86_64-macos and aarch64-macos)"
    if bash scripts/cross.sh >cross.log 2>&1; then
        tail -n 1 cross.log
        passed=$((passed + 1))
    else
        grep -v ': ok$' cross.log | tail -n 40
        echo "test.sh: cross: some file does not compile for macOS"
        failed=$((failed + 1))
    fi
fi
echo "$skipped_checks checks skipped (they need Linux; the POSIX build says which)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
