# bash completion for weir(1): options, their values, files, and hosts from
# ssh's known hosts for --ssh.

# Host names in the known_hosts files (hashed lines are skipped).
_weir_known_hosts()
{
    local f line names
    for f in "$HOME/.ssh/known_hosts" /etc/ssh/ssh_known_hosts; do
        [ -r "$f" ] || continue
        while read -r names _; do
            case $names in ''|'#'*|'|'*|'@'*) continue ;; esac
            local IFS=,
            for line in $names; do
                line=${line#[}
                printf '%s\n' "${line%]:*}"
            done
        done <"$f"
    done
}

_weir()
{
    local cur prev i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()
    # after --, a command and its arguments
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [ "${COMP_WORDS[i]}" = "--" ]; then
            if [ $((i + 1)) -eq "$COMP_CWORD" ]; then
                mapfile -t COMPREPLY < <(compgen -c -- "$cur")
            else
                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            fi
            return 0
        fi
    done
    case $prev in
        -i|-o|-l|--key-file|--genkey|--serve)
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return 0 ;;
        --ssh)
            local user=
            case $cur in *@*) user=${cur%%@*}@; cur=${cur#*@} ;; esac
            mapfile -t COMPREPLY < <(compgen -P "$user" -W "$(_weir_known_hosts | sort -u)" -- "$cur")
            return 0 ;;
        --hash)
            mapfile -t COMPREPLY < <(compgen -W "md5 sha1 sha224 sha256 sha384 sha512 sha3-256 sha3-512 blake2b512 blake2s256" -- "$cur")
            return 0 ;;
        --sweep)
            mapfile -t COMPREPLY < <(compgen -W "short full" -- "$cur")
            return 0 ;;
        -T|--threads|--parallel)
            mapfile -t COMPREPLY < <(compgen -W "1 2 4 8 16" -- "$cur")
            return 0 ;;
        -m|-s|--size|--readahead)
            mapfile -t COMPREPLY < <(compgen -W "64k 1M 4M 16M 64M 256M 512M 1G 4G" -- "$cur")
            return 0 ;;
        -I|-O|-b|-P|-p|-r|-R|-W|--bind|--connect-timeout|--accept-timeout|\
        --timeout|--reconnect|--key-id|--target|--remote|--remote-weir|--remote-opts|--rsh|\
        --interval|--duration|--tcptimeo)
            return 0 ;;
    esac
    case $cur in
        --compress=*)
            mapfile -t COMPREPLY < <(compgen -P "--compress=" -W "1 2 3 4 5 6 7 8 9 10 11 12" -- "${cur#*=}")
            return 0 ;;
        --zstd=*)
            mapfile -t COMPREPLY < <(compgen -P "--zstd=" -W "-5 -1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19" -- "${cur#*=}")
            return 0 ;;
        --adapt=*)
            mapfile -t COMPREPLY < <(compgen -P "--adapt=" -W "-5:15 1:9 -5:3 3:19" -- "${cur#*=}")
            return 0 ;;
        --progress=*)
            mapfile -t COMPREPLY < <(compgen -P "--progress=" -W "json json=2" -- "${cur#*=}")
            return 0 ;;
        -*)
            local opts="-i -o -I -O -m -s -b -P -p -r -R -f -q -v -l -e -4 -6 -z -d -T -h -V -W -H
                -c -L --help --version --bind --connect-timeout --accept-timeout
                --timeout --reconnect --raw --size --readahead --stop-on-error --no-sync
                --genkey --key-id --key-file --target --serve --compress --compress= --zstd
                --zstd= --adapt --adapt= --decompress --threads --md5 --hash --pid
                --truncate --tcptimeo --progress= --interval --ssh --rsh
                --remote-weir --remote --pull --remote-opts --ssh-tunnel --ssh-direct
                --connect-back --sparse --link-test --allow-link-test --duration --parallel
                --sweep"
            mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
            case ${COMPREPLY[*]} in *=) compopt -o nospace 2>/dev/null ;; esac
            return 0 ;;
    esac
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -F _weir weir
