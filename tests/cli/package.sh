#!/bin/bash
# Purpose: the Debian package.  dpkg-buildpackage builds it from a copy of
# the tree; it holds the binary, both man pages, bash and zsh completion,
# the systemd units (neither enabled nor started at installation) and the
# example serve.conf (not a conffile); lintian finds no error in it; its
# weir runs; the completions offer every option of weir's option table and
# complete values and ssh's known hosts.
#
# It builds weir a second time, the package's way (a minute or two), so it
# runs only with WEIR_TEST_PACKAGE=1: scripts/test.sh runs it once, in the
# release phase.  Without it the test says why and exits 77, which meson
# reports as SKIP, never as a pass (and test.sh counts a SKIP as a failure).
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

if [ "${WEIR_TEST_PACKAGE:-}" != 1 ]; then
    echo "# skip (needs WEIR_TEST_PACKAGE=1): building the Debian package takes minutes"
    exit 77
fi
for tool in dpkg-buildpackage dh fakeroot lintian dpkg-deb; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/deps.sh installs it)"
done
[ -r /usr/share/bash-completion/bash_completion ] ||
    fail "bash-completion is missing (scripts/deps.sh installs it)"

# 1. build, from the files git knows (what a clone has, with this
# checkout's changes), never from build directories
mkdir "$TMP/weir"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -z -co --exclude-standard | grep -zv '^build' |
        tar --null -cf - -T -) | tar -xf - -C "$TMP/weir"
else
    tar -C "$SRC" --exclude='./build*' -cf - . | tar -xf - -C "$TMP/weir"
fi || fail "cannot copy the tree to $TMP/weir"
(cd "$TMP/weir" && DEB_BUILD_OPTIONS="parallel=$(nproc)" dpkg-buildpackage -us -uc -b) \
    >"$TMP/build.log" 2>&1 || { tail -n 30 "$TMP/build.log" >&2; fail "dpkg-buildpackage failed"; }
version=$(grep -o "version : '[^']*'" "$SRC/meson.build" | head -n1 | cut -d"'" -f2)
deb=$(ls "$TMP"/weir_"$version"-*_*.deb 2>/dev/null | head -n1)
[ -n "$deb" ] || { ls "$TMP" >&2; fail "no weir_${version}-*.deb was built (meson.build says $version)"; }
ok "dpkg-buildpackage -us -uc -b builds $(basename "$deb")"

# 2. what it holds
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$TMP/files" || fail "dpkg-deb -c failed"
mans=(/usr/share/man/man1/weir.1.gz)
[ -e "$SRC/man/weir.conf.5" ] && mans+=(/usr/share/man/man5/weir.conf.5.gz)
for f in /usr/bin/weir "${mans[@]}" \
         /usr/share/bash-completion/completions/weir /usr/share/zsh/vendor-completions/_weir \
         /lib/systemd/system/weir.socket /lib/systemd/system/weir.service \
         /usr/share/doc/weir/examples/serve.conf /usr/share/doc/weir/copyright; do
    grep -qxF "$f" "$TMP/files" || { cat "$TMP/files" >&2; fail "the package lacks $f"; }
done
ok "it holds weir, ${#mans[@]} man pages, both completions, both units and the example"
grep -q '^/etc/' "$TMP/files" && fail "the package puts a file in /etc (serve.conf is only an example)"
ok "nothing in /etc: the service's file is the administrator's to write"

# 3. lintian: no error; warnings are shown
lintian "$deb" >"$TMP/lintian" 2>&1
grep -v 'running with root privileges' "$TMP/lintian" >"$TMP/lintian.found"
grep -q '^E: ' "$TMP/lintian.found" && { cat "$TMP/lintian.found" >&2; fail "lintian reports errors"; }
grep '^W: ' "$TMP/lintian.found" | sed 's/^/# lintian: /'
ok "lintian: no error ($(grep -c '^W: ' "$TMP/lintian.found") warnings)"

# 4. its weir runs; its units start weir --serve and are neither enabled
# nor started at installation
dpkg-deb -x "$deb" "$TMP/root" || fail "dpkg-deb -x failed"
"$TMP/root/usr/bin/weir" --version >"$TMP/version" 2>&1 || fail "the packaged weir does not run"
grep -qF "$version" "$TMP/version" || fail "the packaged weir is not $version: $(cat "$TMP/version")"
ok "the packaged weir runs ($(head -n1 "$TMP/version"))"
grep -qx 'ExecStart=/usr/bin/weir --serve /etc/weir/serve.conf' \
    "$TMP/root/lib/systemd/system/weir.service" || fail "weir.service does not run weir --serve"
dpkg-deb -e "$deb" "$TMP/control" || fail "dpkg-deb -e failed"
[ -e "$TMP/control/conffiles" ] && fail "the package has conffiles: $(cat "$TMP/control/conffiles")"
# deb-systemd-helper enables a unit only when it "was-enabled" (by the
# administrator); deb-systemd-invoke may only try-restart what runs
grep 'deb-systemd-helper enable' "$TMP/control/postinst" | grep -qv '^\s*#' &&
    ! grep -q 'was-enabled' "$TMP/control/postinst" &&
    fail "the package enables a unit at installation"
grep -E 'deb-systemd-invoke +(start|restart)|systemctl .*(start|enable)' "$TMP/control/postinst" &&
    fail "the package starts or enables a unit at installation"
ok "the units run weir --serve and are neither enabled nor started at installation"
"$TMP/root/usr/bin/weir" --serve "$TMP/root/usr/share/doc/weir/examples/serve.conf" \
    >"$TMP/example.err" 2>&1 && fail "the example served without its key file"
grep -q "/etc/weir/clients.key" "$TMP/example.err" ||
    { cat "$TMP/example.err" >&2; fail "the example: not refused for its missing key file"; }
ok "the example parses up to its key file, which it names"

# 5. the options that the completions leave out on purpose (weir refuses
# them, ignores them, or passes --ssh-server to itself): the files say why
not_offered=" --tapeaware --append --direct --tcpbuffer --no-direct --ssh-server -n -A -a -D -t -u -Q -0 "
opts=()
while read -r name; do opts+=("--$name"); done < <(
    sed -n '/long_opts\[\] = {/,/^};/p' "$TMP/weir/src/options/options.c" |
        grep -o '{"[a-z0-9-]*"' | cut -d'"' -f2)
short=$(grep -o '"+:[^"]*"' "$TMP/weir/src/options/options.c" | tail -n1 | tr -d '"+:')
[ ${#opts[@]} -gt 40 ] && [ ${#short} -gt 20 ] ||
    fail "cannot read the option table of src/options/options.c (${#opts[@]} long, '$short')"
for ((i = 0; i < ${#short}; i++)); do opts+=("-${short:i:1}"); done

# 6. bash: the installed file, with bash-completion loaded as a shell has it
BASHC=$TMP/root/usr/share/bash-completion/completions/weir
bash -n "$BASHC" || fail "bash -n $BASHC"
mkdir -p "$TMP/home/.ssh"
printf '%s\n' 'backup.example.org,192.0.2.7 ssh-ed25519 AAAA' '|1|aGFzaGVk|c2FsdA== ssh-ed25519 AAAA' \
    '[nas1.example.org]:2222 ssh-ed25519 AAAA' '@revoked old.example.org ssh-rsa AAAA' \
    >"$TMP/home/.ssh/known_hosts"
# bash_complete WORD...: the completions of the last word, the words split
# as readline splits them (COMP_WORDBREAKS has '=': --zstd=1 is --zstd = 1)
bash_complete() {
    HOME="$TMP/home" bash -c '
        source /usr/share/bash-completion/bash_completion
        source "$1"; shift
        COMP_WORDS=(weir); for w in "$@"; do
            case $w in --*=*) COMP_WORDS+=("${w%%=*}" = "${w#*=}") ;; *) COMP_WORDS+=("$w") ;; esac
        done
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) COMP_LINE="weir $*" COMP_POINT=${#COMP_LINE}
        _weir; printf "%s\n" "${COMPREPLY[@]}"' _ "$BASHC" "$@"
}
bash_complete --ke | grep -qx -- --key-file || fail "bash: weir --ke<TAB> does not offer --key-file"
ok "bash: weir --ke<TAB> offers --key-file"
bash_complete - >"$TMP/bash.opts"
for o in "${opts[@]}"; do
    case $not_offered in *" $o "*) continue ;; esac
    grep -qx -- "$o" "$TMP/bash.opts" || fail "bash: weir -<TAB> does not offer $o"
done
ok "bash offers every option of the option table (${#opts[@]}, less those left out on purpose)"
bash_complete --zstd=1 | grep -qx 19 || fail "bash: --zstd=1<TAB> does not offer level 19"
bash_complete --compress=1 | grep -qx 12 || fail "bash: --compress=1<TAB> does not offer level 12"
bash_complete --adapt= | grep -qx -- -5:15 || fail "bash: --adapt=<TAB> does not offer -5:15"
ok "bash completes the levels of --zstd=, --compress= and --adapt="
touch "$TMP/home/client.key" "$TMP/home/serve.conf"
bash_complete --key-file "$TMP/home/cli" | grep -qx "$TMP/home/client.key" ||
    fail "bash: --key-file does not complete a file"
bash_complete --serve "$TMP/home/se" | grep -qx "$TMP/home/serve.conf" ||
    fail "bash: --serve does not complete a file"
bash_complete -i "$TMP/home/se" | grep -qx "$TMP/home/serve.conf" || fail "bash: -i does not complete a file"
[ -z "$(bash_complete --target '')" ] || fail "bash: --target offers words (a target name is free)"
ok "bash completes files for --key-file, --serve and -i; --target takes any name"
bash_complete --ssh '' >"$TMP/hosts"
grep -qx backup.example.org "$TMP/hosts" && grep -qx 192.0.2.7 "$TMP/hosts" &&
    grep -qx nas1.example.org "$TMP/hosts" ||
    { cat "$TMP/hosts" >&2; fail "bash: --ssh does not offer the known hosts"; }
grep -qE 'hashed|aGFz|old\.example|ssh-|AAAA' "$TMP/hosts" &&
    { cat "$TMP/hosts" >&2; fail "bash: --ssh offers a hashed or revoked entry, or a key"; }
bash_complete --ssh me@nas | grep -qx me@nas1.example.org ||
    fail "bash: --ssh me@nas<TAB> does not offer me@nas1.example.org"
ok "bash: --ssh offers known hosts ([host]:port as host, with USER@), not hashed or revoked ones"

# 7. zsh: the installed _weir, read by zsh, and (zsh/zpty) completing at a
# real prompt with compinit
command -v zsh >/dev/null || fail "zsh is missing (scripts/deps.sh installs it)"
ZSHC=$TMP/root/usr/share/zsh/vendor-completions/_weir
zsh -n "$ZSHC" || fail "zsh -n $ZSHC"
sed '/^[[:space:]]*#/d' "$ZSHC" >"$TMP/zsh.spec"
for o in "${opts[@]}"; do
    case $not_offered in *" $o "*) continue ;; esac
    grep -qE -- "(^|[^a-zA-Z0-9-])$o([^a-zA-Z0-9-]|$)" "$TMP/zsh.spec" || fail "zsh: _weir lacks $o"
done
ok "_weir names every option of the option table (less those left out on purpose)"
cat >"$TMP/zcomp.zsh" <<'EOF'
# zcomp.zsh DIR LINE: what an interactive zsh (compinit, fpath DIR) shows
# for LINE<TAB><TAB>
zmodload zsh/zpty || exit 2
zpty z "TERM=dumb zsh -f -i"
zpty -w z "PS1='%% '; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D; setopt nobeep; LISTMAX=10000; print RE''ADY"
zpty -r z junk '*READY*'
zpty -w -n z "$2"$'\t\t'
out= chunk= i=0
while (( i++ < 50 )); do
  if zpty -r -t z chunk; then out+=$chunk; i=40; else sleep 0.1; fi
done
zpty -d z
print -r -- "$out"
EOF
zsh_complete() {
    HOME="$TMP/home" timeout 30 zsh -f "$TMP/zcomp.zsh" "$(dirname "$ZSHC")" "$1" 2>&1 | tr -d '\r'
}
zsh_complete 'weir --ke' | grep -q -- '--key-file' || fail "zsh: weir --ke<TAB> does not offer --key-file"
zsh_complete 'weir --ssh ' | grep -q 'backup.example.org' || fail "zsh: --ssh does not offer known hosts"
zsh_complete 'weir --zstd=1' | grep -qw 19 || fail "zsh: --zstd=1<TAB> does not offer level 19"
ok "zsh: --ke<TAB> offers --key-file, --ssh the known hosts, --zstd= its levels"
done_testing
