# bash completion for weir(1): its options, their values (compression
# levels, sizes, digests), files where an option takes a file, and for --ssh
# the hosts in ssh's known hosts.  Installed as
# /usr/share/bash-completion/completions/weir; sourcing it also works.
#
# Not offered, though weir's option table has them: the mbuffer options
# that weir refuses (--tapeaware --append --direct --tcpbuffer -n -A -a -D
# -t -u), those it takes and ignores (--no-direct -Q -0), and --ssh-server,
# which only weir itself passes to the weir that ssh starts.

# Options with no value, with a value (after a space or an '='), and with
# an optional value (only after an '=').
_weir_flags="-f -q -v -e -4 -6 -z -d -h -V -H -c -L --help --version --raw
    --stop-on-error --no-sync --decompress --md5 --pid --truncate --pull
    --ssh-tunnel --ssh-direct --connect-back --sparse --link-test
    --allow-link-test"
_weir_valued="-i -o -I -O -m -s -b -P -p -r -R -l -T -W --bind --connect-timeout
    --accept-timeout --timeout --reconnect --streams --size --readahead --genkey
    --key-id --key-file --target --serve --threads --hash --tcptimeo
    --progress --interval --ssh --rsh --remote-weir --remote --remote-opts
    --duration --parallel --sweep"
_weir_optional="--compress --zstd --adapt"

# The host names of ssh's known hosts files, one a line: the user's and the
# system's.  Hashed entries (|1|...) hide their names and are skipped, as
# are markers (@revoked, @cert-authority) and comments; [host]:port gives
# host.
_weir_known_hosts()
{
    local file names name list IFS=$' \t\n'
    for file in "$HOME/.ssh/known_hosts" /etc/ssh/ssh_known_hosts; do
        [ -r "$file" ] || continue
        while read -r names _; do
            case $names in
                '' | '#'* | '|'* | '@'*) continue ;;
            esac
            IFS=, read -r -a list <<<"$names"
            for name in "${list[@]}"; do
                case $name in
                    '['*']:'*) name=${name#[}; name=${name%%]:*} ;;
                esac
                case $name in
                    *'*'* | *'?'* | '!'*) ;;   # patterns name no one host
                    *) printf '%s\n' "$name" ;;
                esac
            done
        done <"$file"
    done
}

# _weir_reply PREFIX WORDS CUR: COMPREPLY gets the WORDS that start with
# CUR, each with PREFIX before it
_weir_reply()
{
    local found IFS=$' \t\n'
    found=$(compgen -P "$1" -W "$2" -- "$3")
    IFS=$'\n'
    COMPREPLY=($found)
}

# _weir_value OPTION PREFIX CUR: complete the value of OPTION; PREFIX is what
# the reply carries before the value ("--zstd=" when bash does not split
# the word at the '=', else nothing)
_weir_value()
{
    local opt=$1 prefix=$2 cur=$3 IFS=$'\n'
    case $opt in
        -i | -o | -l | --key-file | --genkey | --serve)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -P "$prefix" -f -- "$cur")) ;;
        --ssh)
            # [USER@]HOST: the user is kept, the host is completed
            local user=
            case $cur in *@*) user=${cur%%@*}@ cur=${cur#*@} ;; esac
            _weir_reply "$prefix$user" "$(_weir_known_hosts | sort -u)" "$cur" ;;
        --rsh)
            COMPREPLY=($(compgen -P "$prefix" -c -- "$cur")) ;;
        --compress)
            # LZ4's levels; above 2 it is LZ4HC
            _weir_reply "$prefix" "$(printf '%s\n' {1..12})" "$cur" ;;
        --zstd)
            # zstd's levels, and a few of its fast (negative) ones
            _weir_reply "$prefix" "$(printf '%s\n' {1..19} -1 -3 -5 -10 -100)" "$cur" ;;
        --adapt)
            _weir_reply "$prefix" "-5:15 1:9 -5:3 3:19" "$cur" ;;
        --hash)
            _weir_reply "$prefix" "md5 sha1 sha224 sha256 sha384 sha512 sha3-256 sha3-512
                blake2b512 blake2s256" "$cur" ;;
        --progress)
            _weir_reply "$prefix" "json json=" "$cur"
            [ "${COMPREPLY[*]}" = "${prefix}json=" ] && compopt -o nospace 2>/dev/null ;;
        --sweep)
            _weir_reply "$prefix" "short full" "$cur" ;;
        --streams)
            _weir_reply "$prefix" "auto 1 2 4 8 16" "$cur" ;;
        -T | --threads | --parallel)
            _weir_reply "$prefix" "1 2 4 8 16" "$cur" ;;
        -m | -s | --size | --readahead)
            _weir_reply "$prefix" "64k 1M 4M 16M 64M 256M 512M 1G 4G" "$cur" ;;
        *)
            # addresses, ports, seconds, rates, names (--key-id, --target),
            # remote commands: nothing to offer
            COMPREPLY=() ;;
    esac
}

_weir()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev= i
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    # after --: a command and its own arguments
    for ((i = 1; i < COMP_CWORD; i++)); do
        [ "${COMP_WORDS[i]}" = -- ] || continue
        if declare -F _command_offset >/dev/null; then
            _command_offset $((i + 1))
        elif [ $((i + 1)) -eq "$COMP_CWORD" ]; then
            local IFS=$'\n'
            COMPREPLY=($(compgen -c -- "$cur" | sort -u))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return 0
    done

    # --OPTION=VALUE: bash splits the word at the '=' (COMP_WORDBREAKS), so
    # that the words are --zstd, =, 1 and only the value is replaced; when
    # '=' is not a break, the word is whole and the reply carries --zstd=
    if [ "$cur" = = ] && [[ $prev == --* ]]; then
        _weir_value "$prev" "" ""
        return 0
    fi
    if [ "$prev" = = ] && [ "$COMP_CWORD" -ge 2 ] && [[ ${COMP_WORDS[COMP_CWORD - 2]} == --* ]]; then
        _weir_value "${COMP_WORDS[COMP_CWORD - 2]}" "" "$cur"
        return 0
    fi
    if [[ $cur == --*=* ]]; then
        _weir_value "${cur%%=*}" "${cur%%=*}=" "${cur#*=}"
        return 0
    fi

    # the value of the option before this word
    local valued
    valued=$(echo $_weir_valued)
    case " $valued " in
        *" $prev "*)
            _weir_value "$prev" "" "$cur"
            return 0 ;;
    esac

    if [[ $cur == -* ]]; then
        _weir_reply "" "$_weir_flags $_weir_valued $_weir_optional
            $(printf '%s= ' $_weir_optional)" "$cur"
        # --zstd= waits for its level
        case ${COMPREPLY[*]} in *=) compopt -o nospace 2>/dev/null ;; esac
        return 0
    fi
    compopt -o filenames 2>/dev/null
    local IFS=$'\n'
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _weir weir
