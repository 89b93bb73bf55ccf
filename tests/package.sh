#!/bin/bash
# package.sh - the Debian package: it builds from a copy of the tree with
# dpkg-buildpackage, holds what it must (the binary, both man pages, bash
# and zsh completion, the units, the example file), lintian finds no error
# and no warning in it, its weir runs, and the completions complete.
#
# scripts/test.sh runs it once (it is not a meson test: it builds weir
# again, in the package's own way).  Every check prints "ok N - what"; the
# first failure ends it with "FAIL: why" and exit 1.
set -u
cd "$(dirname "$0")/.."
SRC=$PWD
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-package.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
CHECKS=0
ok() { CHECKS=$((CHECKS + 1)); echo "ok $CHECKS - $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. build, from the files git knows (what a clone has), not from build dirs
mkdir "$TMP/weir"
git ls-files -co --exclude-standard | grep -v '^build' | tar -cf - -T - | tar -xf - -C "$TMP/weir" ||
    fail "cannot copy the tree"
(cd "$TMP/weir" && DEB_BUILD_OPTIONS=parallel=2 dpkg-buildpackage -us -uc -b) \
    >"$TMP/build.log" 2>&1 || { tail -n 30 "$TMP/build.log" >&2; fail "dpkg-buildpackage failed"; }
deb=$(ls "$TMP"/weir_*_*.deb 2>/dev/null | head -n1)
[ -n "$deb" ] || fail "no weir_*.deb was built"
ok "dpkg-buildpackage -us -uc -b builds $(basename "$deb")"

# 2. what it holds
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$TMP/files"
for f in /usr/bin/weir /usr/share/man/man1/weir.1.gz /usr/share/man/man5/weir.conf.5.gz \
         /usr/share/bash-completion/completions/weir /usr/share/zsh/vendor-completions/_weir \
         /lib/systemd/system/weir.socket /lib/systemd/system/weir.service \
         /usr/share/doc/weir/examples/serve.conf /usr/share/doc/weir/copyright; do
    grep -qxF "$f" "$TMP/files" || { cat "$TMP/files" >&2; fail "the package lacks $f"; }
done
ok "it holds the binary, both man pages, both completions, the units and the example"
grep -q '^/etc/' "$TMP/files" && fail "the package puts a file in /etc (the example is not a conffile)"
ok "nothing in /etc: the service's file is the administrator's"

# 3. lintian: no error, no warning
lintian "$deb" >"$TMP/lintian" 2>&1
grep -v 'running with root privileges' "$TMP/lintian" >"$TMP/lintian.found"
if grep -qE '^(E|W): ' "$TMP/lintian.found"; then
    cat "$TMP/lintian.found" >&2
    fail "lintian reports errors or warnings"
fi
ok "lintian: no error and no warning"

# 4. its weir runs, and its units start weir --serve, not enabled
dpkg-deb -x "$deb" "$TMP/root" || fail "dpkg-deb -x"
"$TMP/root/usr/bin/weir" --version >"$TMP/version" 2>&1 || fail "the packaged weir does not run"
grep -q "weir" "$TMP/version" || fail "the packaged weir's --version: $(cat "$TMP/version")"
ok "the packaged weir runs ($(head -n1 "$TMP/version"))"
grep -q '^ExecStart=/usr/bin/weir --serve /etc/weir/serve.conf$' \
    "$TMP/root/lib/systemd/system/weir.service" || fail "weir.service does not run weir --serve"
dpkg-deb -e "$deb" "$TMP/control"
grep -q "deb-systemd-helper enable 'weir.socket'" "$TMP/control/postinst" &&
    ! grep -q "was-enabled 'weir.socket'" "$TMP/control/postinst" &&
    fail "the package enables weir.socket at installation"
grep -q 'systemctl.*start' "$TMP/control/postinst" && fail "the package starts a unit at installation"
ok "the units run weir --serve and are neither enabled nor started at installation"
"$TMP/root/usr/bin/weir" --serve "$TMP/root/usr/share/doc/weir/examples/serve.conf" \
    >"$TMP/example.err" 2>&1 && fail "the example file served without its key file"
grep -q "/etc/weir/clients.key" "$TMP/example.err" ||
    { cat "$TMP/example.err" >&2; fail "the example file: not refused for its missing key file"; }
ok "the example file parses up to its key file, which it names"

# 5. bash completion: options, levels, hosts from known_hosts
bash -n "$TMP/root/usr/share/bash-completion/completions/weir" || fail "bash -n"
mkdir -p "$TMP/home/.ssh"
printf 'backup.example.org,192.0.2.7 ssh-ed25519 AAAA\n|1|hashed= ssh-ed25519 AAAA\n[nas1.example.org]:2222 ssh-ed25519 AAAA\n' \
    >"$TMP/home/.ssh/known_hosts"
complete_for() {   # complete_for WORD...: the completions of the last word
    HOME="$TMP/home" bash -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _weir
        printf "%s\n" "${COMPREPLY[@]}"' _ \
        "$TMP/root/usr/share/bash-completion/completions/weir" weir "$@"
}
complete_for --ke | grep -qx -- --key-file || fail "bash: --ke does not complete to --key-file"
complete_for --zstd=1 | grep -qx -- --zstd=19 || fail "bash: --zstd=1 does not offer level 19"
complete_for --ssh '' | grep -qx backup.example.org || fail "bash: --ssh does not offer known hosts"
complete_for --ssh 'me@nas' | grep -qx me@nas1.example.org ||
    fail "bash: --ssh me@nas does not complete a host with a port"
complete_for --ssh '' | grep -q hashed && fail "bash: --ssh offers a hashed known_hosts entry"
ok "bash completes options, zstd levels and known hosts (hashed ones skipped)"
if command -v zsh >/dev/null; then
    zsh -n "$TMP/root/usr/share/zsh/vendor-completions/_weir" || fail "zsh -n _weir"
    ok "zsh reads _weir"
else
    fail "zsh is missing (scripts/deps.sh installs it)"
fi
echo "package: $CHECKS checks passed"
