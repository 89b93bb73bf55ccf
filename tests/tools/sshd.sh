#!/bin/bash
# sshd.sh - a throwaway sshd on a free loopback port, for weir's tests and
# benchmarks: its own host key, user key and configuration in DIR.
#
#   tests/tools/sshd.sh start DIR   start it; prints "PORT" and writes DIR/ssh,
#                                   a wrapper that logs in as the current user
#   tests/tools/sshd.sh stop DIR    stop it
set -eu
cmd=${1:?start or stop}
dir=${2:?a directory}
case $cmd in
start)
    mkdir -p "$dir"
    chmod 700 "$dir"
    command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] ||
        { echo "sshd.sh: openssh-server is not installed" >&2; exit 1; }
    mkdir -p /run/sshd 2>/dev/null || true
    ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key" </dev/null
    ssh-keygen -q -t ed25519 -N '' -f "$dir/user_key" </dev/null
    cp "$dir/user_key.pub" "$dir/authorized_keys"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$dir/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PidFile $dir/sshd.pid
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
LogLevel ERROR
Ciphers aes128-gcm@openssh.com,chacha20-poly1305@openssh.com,aes256-gcm@openssh.com
AcceptEnv LANG
CONF
    /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
    cat >"$dir/ssh" <<WRAP
#!/bin/sh
exec ssh -p $port -i $dir/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \\
    -o BatchMode=yes -o LogLevel=ERROR "\$@"
WRAP
    chmod 755 "$dir/ssh"
    for _ in $(seq 100); do
        "$dir/ssh" "$(id -un)@127.0.0.1" true 2>/dev/null && break
        sleep 0.05
    done
    "$dir/ssh" "$(id -un)@127.0.0.1" true || { cat "$dir/sshd.log" >&2; exit 1; }
    echo "$port"
    ;;
stop)
    [ -f "$dir/sshd.pid" ] && kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true
    ;;
esac
