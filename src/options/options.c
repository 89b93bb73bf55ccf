/* options.c - see options.h. */
#include "options/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <limits.h>
#include <openssl/evp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/adapt.h"
#include "format/codec.h"

#define MIN_BLOCK 16ULL
#define MAX_BLOCK (1ULL << 30)
#define DEFAULT_BLOCK (1ULL << 20)
/* zstd compresses better in larger frames: mixed data at level 9 came out
 * 4% smaller in frames of 4 MiB than in frames of 1 MiB (doc/design.md) */
#define DEFAULT_ZSTD_BLOCK (4ULL << 20)
#define DEFAULT_MEM (512ULL << 20)
#define DEFAULT_READAHEAD (16ULL << 20)

enum long_only {
    OPT_BIND = 256, OPT_CONNECT_TIMEOUT, OPT_ACCEPT_TIMEOUT, OPT_TIMEOUT, OPT_RECONNECT, OPT_RAW,
    OPT_STREAMS,
    OPT_SIZE, OPT_STOP_ON_ERROR, OPT_UNSUPPORTED_TAPE, OPT_READAHEAD, OPT_NO_SYNC,
    OPT_GENKEY, OPT_KEY_ID, OPT_KEY_FILE, OPT_TARGET, OPT_SERVE,
    /* mbuffer's long options */
    OPT_MD5, OPT_HASH, OPT_PID, OPT_APPEND, OPT_TRUNCATE, OPT_NO_DIRECT, OPT_DIRECT,
    OPT_TCPBUFFER, OPT_TCPTIMEO,
    OPT_PROGRESS, OPT_INTERVAL,
    /* the other end over ssh */
    OPT_SSH, OPT_RSH, OPT_REMOTE_WEIR, OPT_REMOTE, OPT_PULL, OPT_REMOTE_OPTS, OPT_SSH_SERVER,
    OPT_SSH_TUNNEL, OPT_SSH_DIRECT, OPT_CONNECT_BACK,
    OPT_SPARSE, OPT_ZSTD, OPT_ADAPT,
    OPT_LINK_TEST, OPT_ALLOW_LINK_TEST, OPT_DURATION, OPT_PARALLEL, OPT_SWEEP,
};

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"bind", required_argument, NULL, OPT_BIND},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"accept-timeout", required_argument, NULL, OPT_ACCEPT_TIMEOUT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"reconnect", required_argument, NULL, OPT_RECONNECT},
    {"streams", required_argument, NULL, OPT_STREAMS},
    {"raw", no_argument, NULL, OPT_RAW},
    {"size", required_argument, NULL, OPT_SIZE},
    {"readahead", required_argument, NULL, OPT_READAHEAD},
    {"stop-on-error", no_argument, NULL, OPT_STOP_ON_ERROR},
    {"no-sync", no_argument, NULL, OPT_NO_SYNC},
    {"genkey", required_argument, NULL, OPT_GENKEY},
    {"key-id", required_argument, NULL, OPT_KEY_ID},
    {"target", required_argument, NULL, OPT_TARGET},
    {"serve", required_argument, NULL, OPT_SERVE},
    {"key-file", required_argument, NULL, OPT_KEY_FILE},
    {"compress", optional_argument, NULL, 'z'},
    {"zstd", optional_argument, NULL, OPT_ZSTD},
    {"adapt", optional_argument, NULL, OPT_ADAPT},
    {"decompress", no_argument, NULL, 'd'},
    {"threads", required_argument, NULL, 'T'},
    {"tapeaware", no_argument, NULL, OPT_UNSUPPORTED_TAPE},
    {"md5", no_argument, NULL, OPT_MD5},
    {"hash", required_argument, NULL, OPT_HASH},
    {"pid", no_argument, NULL, OPT_PID},
    {"append", no_argument, NULL, OPT_APPEND},
    {"truncate", no_argument, NULL, OPT_TRUNCATE},
    {"no-direct", no_argument, NULL, OPT_NO_DIRECT},
    {"direct", no_argument, NULL, OPT_DIRECT},
    {"tcpbuffer", required_argument, NULL, OPT_TCPBUFFER},
    {"tcptimeo", required_argument, NULL, OPT_TCPTIMEO},
    {"progress", required_argument, NULL, OPT_PROGRESS},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"ssh", required_argument, NULL, OPT_SSH},
    {"rsh", required_argument, NULL, OPT_RSH},
    {"remote-weir", required_argument, NULL, OPT_REMOTE_WEIR},
    {"remote", required_argument, NULL, OPT_REMOTE},
    {"pull", no_argument, NULL, OPT_PULL},
    {"remote-opts", required_argument, NULL, OPT_REMOTE_OPTS},
    {"ssh-server", no_argument, NULL, OPT_SSH_SERVER},
    {"ssh-tunnel", no_argument, NULL, OPT_SSH_TUNNEL},
    {"ssh-direct", no_argument, NULL, OPT_SSH_DIRECT},
    {"connect-back", no_argument, NULL, OPT_CONNECT_BACK},
    {"sparse", no_argument, NULL, OPT_SPARSE},
    {"link-test", no_argument, NULL, OPT_LINK_TEST},
    {"allow-link-test", no_argument, NULL, OPT_ALLOW_LINK_TEST},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"parallel", required_argument, NULL, OPT_PARALLEL},
    {"sweep", required_argument, NULL, OPT_SWEEP},
    {NULL, 0, NULL, 0},
};

/* The help text's first part: the synopsis, then the input, the outputs and
 * the network. */
static void usage_io(FILE *out)
{
    fputs(
"usage: weir [options] [-- COMMAND [ARGS...]]\n"
"  a buffer for pipes and networks: stdin/-i/-I in, stdout/-o/-O out\n"
"  COMMAND is run by weir: the consumer of what weir reads when weir has an\n"
"  input (-i, -I), else the producer whose output weir reads\n"
"\n"
"input and outputs:\n"
"  -i FILE            read FILE (default stdin; - is stdin)\n"
"  -o FILE            write FILE; repeatable (default stdout)\n"
"  -f                 allow -o to overwrite an existing regular file\n"
"  --sparse           runs of zeros read (4 KiB grains) become holes as well as\n"
"                     a file's own; a regular-file output keeps them as holes\n"
"  -I [HOST:]PORT     listen on PORT (0 picks one); only HOST may connect\n"
"  -O HOST:PORT       send to HOST:PORT ([v6addr]:PORT); repeatable\n"
"  --bind ADDR        listen on ADDR only\n"
"  -4, -6             use IPv4 or IPv6 only\n"
"  --connect-timeout S  keep retrying -O for S seconds (default 30, 0 = once)\n"
"  --accept-timeout S   give up waiting for a -I connection (default: never)\n"
"  --timeout S        fail a connection with no progress for S seconds (600)\n"
"  --reconnect S      resume a broken connection between two weirs within S seconds\n"
"                     (300; 0 = a break fails the transfer)\n"
"  --streams N|auto   one transfer over N connections to a weir receiver (at most\n"
"                     16), for long paths; auto (default): one a 12.5 ms of\n"
"                     round trip, at most 8; -I --streams 1: take one only\n"
"  --raw              plain bytes on the wire, for nc, socat and mbuffer peers\n"
"  -W S               watchdog: fail when neither the input nor any output\n"
"                     moves a byte for S seconds (and a listener nobody joins,\n"
"                     an output FIFO nobody opens)\n",
        out);
}

/* The help text on the buffer and on keys. */
static void usage_buffer_and_keys(FILE *out)
{
    fputs(
"\n"
"buffer:\n"
"  -m SIZE|N%         buffer size (default 512M; committed only as used)\n"
"  -s SIZE            block size (default 1M; 4M with --zstd and --adapt)\n"
"  -b NUM             number of blocks (sets -m to NUM * -s)\n"
"  -P PCT             start writing when the buffer is PCT% full\n"
"  -p PCT             after the buffer filled, resume reading below PCT%\n"
"  -r RATE, -R RATE   limit the read or write rate (bytes/s, k M G T P)\n"
"  --readahead SIZE   read a regular file at most SIZE ahead (default 16M)\n"
"  --stop-on-error, -e  the first failed output stops everything\n"
"  --no-sync          do not flush file and device outputs to stable storage\n"
"                     before reporting success (faster, not crash-safe)\n"
"\n"
"keys (authenticated, encrypted connections between two weirs):\n"
"  --genkey FILE      write a new key file (mode 0600) and exit\n"
"  --key-id NAME      the key's name for --genkey (default: the host name),\n"
"                     the key of the file a sender uses (default: the first),\n"
"                     or the one key a listener takes (default: any of them)\n"
"  --key-file FILE    -I admits only senders with a key of FILE; -O sends only\n"
"                     to a receiver that has the key; both encrypt\n"
"  --target NAME      -O to a service: the target of this key to send to\n"
"                     (default: the key's first)\n"
"\n"
"a service (a permanent, keyed backup target; weir.conf(5)):\n"
"  --serve FILE       listen as FILE says, and run for each keyed sender the\n"
"                     target its key and --target name; -v and -l FILE only\n",
        out);
}

/* The help text on the other end over ssh and on the link test. */
static void usage_ssh_and_link_test(FILE *out)
{
    fputs(
"\n"
"the other end over ssh (one command, two machines; weir(1), SSH):\n"
"  --ssh [USER@]HOST  start the other weir on HOST with ssh; the data goes\n"
"                     directly over TCP, encrypted with a one-time key\n"
"  --remote CMD       the command on HOST: the consumer, or with --pull the\n"
"                     producer (a string for the remote shell)\n"
"  --pull             HOST sends: a command after -- is then the consumer\n"
"  --rsh CMD          the ssh command (default ssh; e.g. 'ssh -p 2222')\n"
"  --remote-weir PATH the weir on HOST (default: weir on its PATH)\n"
"  --remote-opts OPTS more options for the remote weir (split at spaces)\n"
"  --ssh-tunnel       the data goes through the ssh connection (ssh encrypts)\n"
"  --ssh-direct       never through ssh: fail if no direct connection is made\n"
"  --connect-back     this weir listens and the remote one connects (NAT)\n"
"\n"
"link test (throughput both ways and the round trip, with no data of yours):\n"
"  --link-test -O HOST:PORT  measure the link to a weir -I there, which serves\n"
"                     holders of its --key-file, or anyone with --allow-link-test\n"
"  --duration S       seconds a measurement (default 2)\n"
"  --parallel N       connections each way (default 1, at most 16)\n"
"  --sweep short|full|SIZE,...  write sizes (short: 1k 64k 1M; full: 1k to 1M)\n"
"  --allow-link-test  -I: serve link tests to testers without a key as well\n",
        out);
}

/* The help text's last part: compression, reporting, then sizes and the exit
 * status. */
static void usage_compression_and_reporting(FILE *out)
{
    fputs(
"\n"
"compression and the weir stream:\n"
"  -z, --compress[=LEVEL]  LZ4-compress what is sent (LEVEL > 2 uses LZ4HC)\n"
"  --zstd[=LEVEL]     zstd-compress what is sent, on every worker (LEVEL 1 to 19,\n"
"                     -1 to -100 fast; default 3); files get a .zst stream\n"
"  --adapt[=MIN:MAX]  zstd whose level follows the bottleneck (default -5:15);\n"
"                     data that does not compress is stored\n"
"  -d                 decode a weir stream or .lz4 data\n"
"  -T N               worker threads for -z and -d (default: online CPUs)\n"
"\n"
"reporting:\n"
"  --size SIZE        expected total, for percent done and ETA\n"
"  --progress=json[=FD|=PATH]  progress as JSON lines, for programs: to stderr\n"
"                     (instead of the status line), descriptor FD or file PATH\n"
"  --interval S       seconds between --progress lines (default 1)\n"
"  -q                 only errors on stderr\n"
"  -v                 more messages\n"
"  -l FILE            also log messages to FILE\n"
"  -H, --md5, --hash ALGO  print a digest of the data at the end (md5, sha256...)\n"
"  --pid              print weir's process id\n"
"  -c                 write file outputs with O_DSYNC;  -L  lock the buffer in RAM\n"
"  -h, --help         this text;  -V, --version  the version\n"
"\n"
"Sizes take k M G T P (binary). Exit status: 0 ok, 1 resources, 2 usage, 3 input,\n"
"4 output, 5 network, 6 data integrity, 128+N signal N. See weir(1); under the\n"
"name mbuffer, weir takes mbuffer's options (weir(1), COMPATIBILITY).\n",
        out);
}

void options_usage(FILE *out)
{
    usage_io(out);
    usage_buffer_and_keys(out);
    usage_ssh_and_link_test(out);
    usage_compression_and_reporting(out);
}

#define bad(err, ...) error_set((err), WEIR_EXIT_USAGE, __VA_ARGS__)

int options_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s || !(*s >= '0' && *s <= '9'))
        return -1;
    size_t digits = strspn(s, "0123456789");
    if (s[digits] == '.')
        digits += 1 + strspn(s + digits + 1, "0123456789");
    if (strchr("kKmMgGtTpPbB", s[digits]) == NULL)   /* no exponents, no hex */
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1048576.0; end++; break;
    case 'g': case 'G': mult = 1073741824.0; end++; break;
    case 't': case 'T': mult = 1099511627776.0; end++; break;
    case 'p': case 'P': mult = 1125899906842624.0; end++; break;
    default: break;
    }
    if (mult > 1 && end[0] == 'i' && end[1] == 'B')
        end += 2;
    else if (end[0] == 'B' || end[0] == 'b')
        end++;
    if (*end)
        return -1;
    double bytes = v * mult;
    if (bytes >= 18446744073709551616.0 || bytes != floor(bytes))
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

static uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psize <= 0)
        return 0;
    return (uint64_t)pages * (uint64_t)psize;
}

static int parse_pct(const char *opt, const char *s, int *out, struct weir_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 100)
        return bad(err, "%s: '%s' is not a percentage from 0 to 100", opt, s);
    *out = (int)v;
    return 0;
}

/* Digits with at most one '.': what a time may be written as (strtod
 * alone would also take "0x10", "1e3", " 5"). */
static bool plain_decimal(const char *s)
{
    size_t whole = strspn(s, "0123456789"), frac = 0;
    if (s[whole] == '.')
        frac = strspn(s + whole + 1, "0123456789");
    return whole + frac > 0 && s[whole + (s[whole] == '.') + frac] == '\0';
}

static int parse_secs(const char *opt, const char *s, double *out, struct weir_error *err)
{
    if (!plain_decimal(s))
        return bad(err, "%s: '%s' is not a number of seconds", opt, s);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* the bound keeps every conversion to milliseconds within an int (the
     * type of poll()'s timeout and of TCP_USER_TIMEOUT) */
    if (errno || end == s || *end || !isfinite(v) || v < 0)
        return bad(err, "%s: '%s' is not a number of seconds", opt, s);
    if (v > OPTIONS_MAX_SECS)
        return bad(err, "%s: %s seconds is too long (at most %d, about 24 days)", opt, s,
                   OPTIONS_MAX_SECS);
    *out = v;
    return 0;
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out,
                     struct weir_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char range[64];
        snprintf(range, sizeof range, "%d to %d", lo, hi);
        return error_set(err, WEIR_EXIT_USAGE, "%s: '%s' is not a whole number from %s",
                         opt, s, range);
    }
    *out = (int)v;
    return 0;
}

/* Split "HOST:PORT", "[v6]:PORT" or (when host is optional) "PORT". */
static int split_hostport(const char *opt, const char *s, bool host_required, char *host,
                          size_t hostlen, char *port, size_t portlen, struct weir_error *err)
{
    const char *colon;
    host[0] = '\0';
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return bad(err, "%s: '%s' is not [ADDRESS]:PORT", opt, s);
        if ((size_t)(close - s - 1) >= hostlen)
            return bad(err, "%s: host name too long in '%s'", opt, s);
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = '\0';
        colon = close + 1;
    } else {
        /* the port is what follows the last colon, as mbuffer has it:
         * "::1:7002" is [::1]:7002 */
        colon = strrchr(s, ':');
        if (colon) {
            if ((size_t)(colon - s) >= hostlen)
                return bad(err, "%s: host name too long in '%s'", opt, s);
            memcpy(host, s, (size_t)(colon - s));
            host[colon - s] = '\0';
        }
    }
    const char *p = colon ? colon + 1 : s;
    if (host_required && !host[0])
        return bad(err, "%s: '%s' needs HOST:PORT", opt, s);
    if (colon && !host[0] && s[0] != '[' && host_required)
        return bad(err, "%s: '%s' has an empty host", opt, s);   /* -I :PORT: every address */
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (!*p || errno || *end || v < 0 || v > 65535 || p[0] == '-' || p[0] == '+')
        return bad(err, "%s: '%s' has no valid port (0 to 65535)", opt, s);
    if (v == 0 && host_required)
        return bad(err, "%s: '%s': cannot send to port 0", opt, s);
    snprintf(port, portlen, "%ld", v);
    return 0;
}

struct raw_sizes {
    const char *mem, *block, *blocks;
};

/* -m SIZE or -m PCT% (of phys, the physical memory) into *mem. */
static int parse_mem(const char *arg, uint64_t phys, uint64_t *mem, struct weir_error *err)
{
    size_t len = strlen(arg);
    if (len > 1 && arg[len - 1] == '%') {
        char *end;
        errno = 0;
        double pct = strtod(arg, &end);
        if (errno || end != arg + len - 1 || !(pct > 0) || pct > 90)
            return bad(err, "-m: '%s' is not a percentage of memory (up to 90%%)", arg);
        *mem = (uint64_t)((double)phys * pct / 100.0);
    } else if (options_parse_size(arg, mem)) {
        return bad(err, "-m: '%s' is not a valid size", arg);
    }
    if (*mem == 0)
        return bad(err, "-m: '%s': the buffer cannot be empty", arg);
    return 0;
}

static int resolve_sizes(struct weir_options *o, const struct raw_sizes *r,
                         struct weir_error *err)
{
    uint64_t phys = physical_memory();
    uint64_t nblocks = 0;
    o->block = DEFAULT_BLOCK;
    if (r->block && (options_parse_size(r->block, &o->block) || o->block == 0))
        return bad(err, "-s: '%s' is not a valid size", r->block);
    if (o->block < MIN_BLOCK || o->block > MAX_BLOCK)
        return bad(err, "-s: %s is out of range (16 bytes to 1G)", r->block);
    if (r->blocks) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(r->blocks, &end, 10);
        if (errno || end == r->blocks || *end || v == 0 || r->blocks[0] == '-')
            return bad(err, "-b: '%s' is not a positive number of blocks", r->blocks);
        nblocks = v;
    }
    if (r->mem) {
        if (parse_mem(r->mem, phys, &o->mem, err))
            return -1;
        if (r->blocks && r->block)
            return bad(err, "-m, -s and -b together over-determine the buffer; give two");
        if (r->blocks)
            o->block = o->mem / nblocks;
        if (o->block < MIN_BLOCK)
            return bad(err, "-b: blocks of %llu bytes are too small (at least 16)",
                       (unsigned long long)o->block);
    } else {
        if (r->blocks && nblocks > UINT64_MAX / o->block)
            return bad(err, "-b: '%s' blocks is absurdly large", r->blocks);
        o->mem = r->blocks ? nblocks * o->block : DEFAULT_MEM;
    }
    if (phys && o->mem > phys)
        return bad(err, "-m: the buffer (%s) is larger than physical memory",
                   r->mem ? r->mem : r->blocks);
    if (o->zstd && !r->block && !r->blocks && o->mem / DEFAULT_ZSTD_BLOCK >= 16)
        o->block = DEFAULT_ZSTD_BLOCK;
    o->nblocks = o->mem / o->block;
    if (o->nblocks < 2 && r->block)
        return bad(err, "-m and -s: a buffer of %llu bytes holds fewer than 2 blocks of %s",
                   (unsigned long long)o->mem, r->block);
    if (o->nblocks < 2 && !r->mem)
        return bad(err, "-b: the buffer must hold at least 2 blocks");
    if (o->nblocks < 2)
        return bad(err, "-m: %s holds fewer than 2 blocks of the default block size (1M); "
                   "give a smaller -s as well", r->mem);
    if (o->nblocks > (1u << 24))
        return bad(err, "-s: too many blocks (more than 16777216); use a larger -s");
    o->mem = o->nblocks * o->block;
    return 0;
}

/* --serve takes everything from its file; --target is a keyed sender's. */
static int check_serve(const struct weir_options *o, bool any_tcp, struct weir_error *err)
{
    if (o->serve && (o->listen || o->noutputs || o->input_path || o->command || o->key_file ||
                     o->key_id || o->genkey || o->ssh_host || o->ssh_server || o->link_test ||
                     o->target || o->decode || o->progress))
        return bad(err, "--serve takes its listening address, keys and targets from its file "
                   "(weir.conf(5)): give it alone, with -v, -q or -l");
    if (o->target && (!any_tcp || !o->key_file))
        return bad(err, "--target names a service's target: it needs -O and --key-file");
    if (o->target && (!o->target[0] || !codec_target_name_ok(o->target)))
        return bad(err, "--target %s: a target's name is 1 to %d of A-Z a-z 0-9 . _ -",
                   o->target, CODEC_TARGET_MAX);
    return 0;
}

/* --ssh and its company; and --ssh-server, which takes the rest over ssh. */
static int check_ssh(const struct weir_options *o, struct weir_error *err)
{
    if (o->ssh_server && (o->ssh_host || o->listen || o->noutputs || o->input_path ||
                          o->command || o->key_file))
        return bad(err, "--ssh-server is how weir --ssh starts the other end: give it alone");
    if (!o->ssh_host) {
        if (o->remote_cmd || o->pull || o->rsh || o->remote_weir || o->remote_opts ||
            o->ssh_path != SSH_PATH_AUTO || o->connect_back)
            return bad(err, "--remote, --pull, --rsh, --remote-weir, --remote-opts, "
                       "--ssh-tunnel, --ssh-direct and --connect-back need --ssh HOST");
        return 0;
    }
    if (!o->remote_cmd)
        return bad(err, "--ssh: --remote 'CMD' names the command on the other host (the "
                   "consumer, or with --pull the producer)");
    if (o->listen || o->key_file || o->raw)
        return bad(err, "--ssh makes the connection itself, with a one-time key: it takes no "
                   "-I, -O, --key-file or --raw");
    for (int i = 0; i < o->noutputs; i++)
        if (o->outputs[i].kind == OUTPUT_TCP)
            return bad(err, "--ssh makes the connection itself, with a one-time key: it takes "
                       "no -I, -O, --key-file or --raw");
    if (o->pull && o->input_path)
        return bad(err, "--pull: the input is the remote command; -i names another");
    if (o->decode)
        return bad(err, "-d with --ssh: the stream between the two weirs is decoded anyway");
    if (o->connect_back && o->ssh_path == SSH_PATH_TUNNEL)
        return bad(err, "--connect-back and --ssh-tunnel contradict each other: the tunnel "
                   "makes no connection");
    if (o->hash)
        return bad(err, "-H/--hash with --ssh: not supported yet (take the digest with "
                   "--remote-opts on the receiving end)");
    return 0;
}

/* --link-test against one listener, and nothing of a transfer; the
 * options of a test only with it; a listener's own only with -I. */
static int check_link_test(struct weir_options *o, const struct raw_sizes *r,
                           struct weir_error *err)
{
    if (o->allow_link_test && !o->listen)
        return bad(err, "--allow-link-test needs -I: it lets a listener serve link tests");
    if (o->allow_link_test && o->raw)
        return bad(err, "--allow-link-test and --raw contradict each other: a --raw listener "
                   "never greets, so no tester can ask it for a test");
    if (!o->link_test) {
        if (o->link_duration > 0)
            return bad(err, "--duration needs --link-test");
        if (o->link_parallel > 0)
            return bad(err, "--parallel needs --link-test");
        if (o->link_sweep)
            return bad(err, "--sweep needs --link-test");
        return 0;
    }
    if (o->listen || o->input_path || o->command)
        return bad(err, "--link-test moves no data of yours: it takes no -i, -I or command");
    if (o->noutputs != 1 || o->outputs[0].kind != OUTPUT_TCP)
        return bad(err, "--link-test needs one -O HOST:PORT (the listener it tests against) "
                   "and no other output");
    if (o->compress || o->decode || o->raw || o->hash)
        return bad(err, "--link-test measures the link itself: -z, --zstd, -d, --raw and -H "
                   "do not apply");
    if (o->read_rate || o->write_rate || o->expect_size || o->watchdog > 0 ||
        o->start_write_pct || o->resume_read_pct != 100 || r->mem || r->block || r->blocks)
        return bad(err, "--link-test has no buffer: -m, -s, -b, -P, -p, -r, -R, --size and -W "
                   "do not apply");
    if (o->link_duration == 0)
        o->link_duration = LINKTEST_DURATION_DEFAULT;
    if (o->link_parallel == 0)
        o->link_parallel = 1;
    if (o->link_nsizes == 0)
        o->link_nsizes = linktest_sweep("short", o->link_sizes);
    return 0;
}

/* --sweep short, full, or a list of write sizes. */
static int parse_sweep(struct weir_options *o, const char *arg, struct weir_error *err)
{
    o->link_sweep = arg;
    o->link_nsizes = linktest_sweep(arg, o->link_sizes);
    if (o->link_nsizes > 0)
        return 0;
    const char *p = arg;
    for (;;) {
        char one[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof one)
            return bad(err, "--sweep: '%s' is not short, full or a list of sizes (1k,64k,1M)",
                       arg);
        memcpy(one, p, len);
        one[len] = '\0';
        uint64_t v;
        if (options_parse_size(one, &v) || v < LINKTEST_SIZE_MIN || v > LINKTEST_SIZE_MAX)
            return bad(err, "--sweep: '%s' is not a write size from %u bytes to 4M", one,
                       LINKTEST_SIZE_MIN);
        if (o->link_nsizes == LINKTEST_SIZES_MAX)
            return bad(err, "--sweep: more than %d write sizes", LINKTEST_SIZES_MAX);
        o->link_sizes[o->link_nsizes++] = (uint32_t)v;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* -z, --zstd and --adapt against each other, decoding, -I and -H. */
static int check_compression(const struct weir_options *o, struct weir_error *err)
{
    const char *zname = o->adapt ? "--adapt" : o->zstd ? "--zstd" : "-z";
    if (o->lz4 && o->zstd)
        return bad(err, "-z and %s contradict each other: LZ4 or zstd", o->adapt ? "--adapt"
                                                                               : "--zstd");
    if (o->adapt && o->zstd_level)
        return bad(err, "--zstd=LEVEL and --adapt contradict each other: one level, or "
                   "the level that follows the link");
    if (o->compress && o->decode)
        return bad(err, "%s and -d contradict each other", zname);
    if (o->compress && o->listen && !o->raw)
        return bad(err, "%s with -I: compress on the sending side (weir %s -O), or add "
                   "--raw to compress what a plain sender sends", zname, zname);
    if (o->hash && o->compress)
        return bad(err, "-H/--hash and %s: the digest is of the data as written, and %s "
                   "writes it compressed; take the digest where it is decoded (weir -d -H)",
                   zname, zname);
    return 0;
}

static int check_conflicts(struct weir_options *o, bool ct_given,
                           struct weir_error *err)
{
    if (o->listen && o->input_path)
        return bad(err, "-i and -I both name an input; give one");
    if (o->bind_addr && !o->listen)
        return bad(err, "--bind needs -I");
    bool any_tcp = false;
    int stdouts = 0;
    for (int i = 0; i < o->noutputs; i++) {
        if (o->outputs[i].kind == OUTPUT_TCP)
            any_tcp = true;
        else if (strcmp(o->outputs[i].path, "-") == 0)
            stdouts++;
    }
    if (stdouts > 1)
        return bad(err, "-o -: standard output is named more than once");
    if (ct_given && !any_tcp)
        return bad(err, "--connect-timeout needs -O");
    if (o->quiet && o->verbosity)
        return bad(err, "-q and -v contradict each other");
    if (check_compression(o, err))
        return -1;
    if (o->sparse && o->decode)
        return bad(err, "--sparse with -d: a stream's holes are what its sender found; give "
                   "--sparse to the weir that reads the data as it is");
    if (o->sparse && o->listen && !o->raw && !o->as_mbuffer)
        return bad(err, "--sparse with -I: a weir stream's holes are what its sender found; "
                   "give --sparse to the sender, or add --raw to find holes in plain bytes");
    if (o->accept_timeout > 0 && !o->listen)
        return bad(err, "--accept-timeout needs -I");
    if (o->streams_given && !any_tcp && !o->listen && !o->ssh_host)
        return bad(err, "--streams needs -O (or -I: with 1, a receiver takes one connection "
                   "a transfer)");
    if (o->streams > 1 && o->ssh_host &&
        (o->pull || o->connect_back || o->ssh_path == SSH_PATH_TUNNEL))
        return bad(err, "--streams with --ssh spreads a push over direct connections only "
                   "(not --pull, --connect-back or --ssh-tunnel)");
    if (o->streams > 1 && o->raw)
        return bad(err, "--streams and --raw contradict each other: only a weir receiver "
                   "puts chunks back in order");
    if (check_ssh(o, err))
        return -1;
    if (o->key_id && !o->key_file && !o->genkey)
        return bad(err, "--key-id needs --key-file or --genkey");
    if (check_serve(o, any_tcp, err))
        return -1;
    if (o->genkey && (o->key_file || o->listen || o->noutputs || o->input_path || o->command))
        return bad(err, "--genkey only writes a key file: give it alone (with --key-id)");
    if (o->key_file && !o->listen && !any_tcp)
        return bad(err, "--key-file needs -I or -O: keys protect connections");
    if (o->key_file && o->raw)
        return bad(err, "--key-file and --raw contradict each other: plain bytes cannot be "
                   "authenticated");
    int extra = (o->hash ? 1 : 0) + (o->command && o->command_consumes ? 1 : 0);
    if (o->noutputs + extra > WEIR_MAX_OUTPUTS)
        return error_set(err, WEIR_EXIT_USAGE, "too many outputs (at most %d, the consumer "
                         "after -- and the digest of -H included)", WEIR_MAX_OUTPUTS);
    if (o->command && o->command_consumes) {
        if (stdouts > 0)
            return bad(err, "-o - and the consumer after -- both write to standard output");
    }
    return 0;
}

static int add_output(struct weir_options *o, int opt, const char *arg, struct weir_error *err)
{
    if (o->noutputs == WEIR_MAX_OUTPUTS)
        return error_set(err, WEIR_EXIT_USAGE, "too many outputs (at most %d)",
                         WEIR_MAX_OUTPUTS);
    struct output_spec *s = &o->outputs[o->noutputs];
    memset(s, 0, sizeof *s);
    if (opt == 'o') {
        if (!*arg)
            return bad(err, "-o: empty file name");
        s->kind = OUTPUT_FILE;
        s->path = arg;
    } else {
        s->kind = OUTPUT_TCP;
        if (split_hostport("-O", arg, true, s->host, sizeof s->host, s->port,
                           sizeof s->port, err))
            return -1;
    }
    o->noutputs++;
    return 0;
}

static int unsupported(int opt, struct weir_error *err)
{
    const char *what = "tape volumes and autoloaders";
    if (opt == 't' || opt == 'T' || opt == OPT_DIRECT)
        what = "file-backed buffers";
    char name[16];
    if (opt == OPT_UNSUPPORTED_TAPE || opt == OPT_DIRECT)
        snprintf(name, sizeof name, opt == OPT_DIRECT ? "--direct" : "--tapeaware");
    else
        snprintf(name, sizeof name, "-%c", opt);
    return error_set(err, WEIR_EXIT_USAGE, "%s: not supported: weir has no %s", name, what);
}

/* --progress=json, json=FD (digits only) or json=PATH (./3 is a file). */
static int parse_progress(struct weir_options *o, const char *arg, struct weir_error *err)
{
    if (o->progress)
        return bad(err, "--progress: given more than once");
    if (strncmp(arg, "json", 4) != 0 || (arg[4] != '\0' && arg[4] != '='))
        return bad(err, "--progress: '%s' is not json, json=FD or json=PATH", arg);
    o->progress = true;
    if (arg[4] == '\0')
        return 0;
    const char *target = arg + 5;
    if (!*target)
        return bad(err, "--progress: '%s' names no descriptor or file", arg);
    if (strspn(target, "0123456789") == strlen(target)) {
        char *end;
        errno = 0;
        long fd = strtol(target, &end, 10);
        if (errno || *end || fd > INT_MAX)
            return bad(err, "--progress: %s is not a descriptor number (write ./%s for a "
                       "file)", target, target);
        o->progress_to_fd = true;
        o->progress_fd = (int)fd;
        return 0;
    }
    o->progress_path = target;
    return 0;
}

/* --interval only paces --progress; its default is 1 s.  Descriptor 1 is
 * a consumer's standard output: the lines would land in what it writes. */
static int check_progress(struct weir_options *o, struct weir_error *err)
{
    if (o->interval > 0 && !o->progress)
        return bad(err, "--interval needs --progress");
    if (o->progress_to_fd && o->progress_fd == STDOUT_FILENO && o->command &&
        o->command_consumes)
        return bad(err, "--progress=json=1: standard output is the consumer's (the command "
                   "after --): give the lines a descriptor of their own "
                   "(--progress=json=3 3>FILE) or a file (--progress=json=FILE)");
    if (o->interval <= 0)
        o->interval = 1;
    return 0;
}

static void defaults(struct weir_options *o)
{
    memset(o, 0, sizeof *o);
    o->resume_read_pct = 100;
    o->family = AF_UNSPEC;
    o->connect_timeout = 30;
    o->io_timeout = 600;
    o->reconnect = 300;
    o->level = 1;
    o->readahead = DEFAULT_READAHEAD;
    o->mbuffer_level = -1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
}

/* What parse_one answers for an option that is not of this step's concern. */
#define NOT_MINE 1

/* The input and the outputs: -i, -o, -O, -I, -f (--truncate), -c, --append and
 * --sparse. */
static int parse_io_option(struct weir_options *o, int c, const char *arg,
                           struct weir_error *err)
{
    switch (c) {
    case 'i':
        if (o->input_path)
            return bad(err, "-i: only one input (already '%s')", o->input_path);
        o->input_path = arg;
        o->input_given = true;
        return 0;
    case 'o': case 'O':
        return add_output(o, c, arg, err);
    case 'I':
        if (o->listen)
            return bad(err, "-I: only one listening port");
        o->listen = true;
        o->input_given = true;
        return split_hostport("-I", arg, false, o->allow_host, sizeof o->allow_host,
                              o->listen_port, sizeof o->listen_port, err);
    case 'f': case OPT_TRUNCATE: o->force = true; return 0;
    case 'c': o->dsync = true; return 0;
    case OPT_APPEND:
        return bad(err, "--append: not supported: weir writes a whole stream to a new file, "
                   "or with -f over an existing one; append with -o /dev/stdout >> FILE");
    case OPT_SPARSE: o->sparse = true; return 0;
    default:
        return NOT_MINE;
    }
}

/* The network: addresses and families, timeouts, --raw, mbuffer's TCP options,
 * and the watchdog -W. */
static int parse_network_option(struct weir_options *o, int c, const char *arg, bool *ct_given,
                                struct weir_error *err)
{
    switch (c) {
    case 'W':
        return parse_secs("-W", arg, &o->watchdog, err);
    case '0': o->family = AF_UNSPEC; return 0;
    case OPT_TCPBUFFER:
        return bad(err, "--tcpbuffer: not supported: weir leaves TCP buffer sizes to the "
                   "kernel, which tunes them to the connection");
    case OPT_TCPTIMEO: {
        char *end;
        errno = 0;
        double ms = strtod(arg, &end);
        if (!plain_decimal(arg) || errno || end == arg || *end || !isfinite(ms) || ms < 0 ||
            ms > OPTIONS_MAX_SECS * 1000.0)
            return bad(err, "--tcptimeo: '%s' is not a number of milliseconds (at most %d000)",
                       arg, OPTIONS_MAX_SECS);
        o->io_timeout = ms / 1000.0;
        return 0;
    }
    case '4': case '6': {
        int fam = c == '4' ? AF_INET : AF_INET6;
        if (o->family != AF_UNSPEC && o->family != fam)
            return bad(err, "-4 and -6 contradict each other");
        o->family = fam;
        return 0;
    }
    case OPT_BIND: o->bind_addr = arg; return 0;
    case OPT_CONNECT_TIMEOUT:
        *ct_given = true;
        return parse_secs("--connect-timeout", arg, &o->connect_timeout, err);
    case OPT_ACCEPT_TIMEOUT:
        return parse_secs("--accept-timeout", arg, &o->accept_timeout, err);
    case OPT_TIMEOUT: return parse_secs("--timeout", arg, &o->io_timeout, err);
    case OPT_RECONNECT: return parse_secs("--reconnect", arg, &o->reconnect, err);
    case OPT_RAW: o->raw = true; return 0;
    case OPT_STREAMS:
        o->streams_given = true;
        if (strcmp(arg, "auto") == 0) {
            o->streams = 0;
            return 0;
        }
        return parse_int("--streams", arg, 1, CODEC_STREAMS_MAX, &o->streams, err);
    default:
        return NOT_MINE;
    }
}

/* The buffer's options: its size and blocks, its thresholds and rates, and
 * mbuffer's options for devices and tapes that weir has no use for. */
static int parse_buffer_option(struct weir_options *o, int c, const char *arg,
                               struct raw_sizes *r, struct weir_error *err)
{
    switch (c) {
    case 'm': r->mem = arg; return 0;
    case 's': r->block = arg; return 0;
    case 'b': r->blocks = arg; return 0;
    case 'P': return parse_pct("-P", arg, &o->start_write_pct, err);
    case 'p': return parse_pct("-p", arg, &o->resume_read_pct, err);
    case 'r': case 'R': {
        uint64_t *rate = c == 'r' ? &o->read_rate : &o->write_rate;
        if (options_parse_size(arg, rate) || *rate == 0)
            return error_set(err, WEIR_EXIT_USAGE, "-%c: '%s' is not a positive rate",
                             c, arg);
        return 0;
    }
    case 'L': o->lock_memory = true; return 0;
    case 'Q': case OPT_NO_DIRECT: return 0;   /* what they turn off, weir never does */
    case 'u':
        return bad(err, "-u: not supported: weir does not pause after each write; pace "
                   "the output with -R RATE");
    case 'e': case OPT_STOP_ON_ERROR: o->stop_on_error = true; return 0;
    case OPT_NO_SYNC: o->no_sync = true; return 0;
    case OPT_READAHEAD:
        if (options_parse_size(arg, &o->readahead) || o->readahead == 0)
            return bad(err, "--readahead: '%s' is not a valid size", arg);
        if (o->readahead > OPTIONS_MAX_READAHEAD)
            return bad(err, "--readahead: %s is larger than any buffer (at most 1P)", arg);
        return 0;
    case 'n': case 'A': case 'a': case 'D': case 't': case OPT_UNSUPPORTED_TAPE:
    case OPT_DIRECT:
        return unsupported(c, err);
    default:
        return NOT_MINE;
    }
}

/* --genkey, --key-id and --key-file. */
static int parse_key_option(struct weir_options *o, int c, const char *arg)
{
    switch (c) {
    case OPT_GENKEY: o->genkey = arg; return 0;
    case OPT_KEY_ID: o->key_id = arg; return 0;
    case OPT_KEY_FILE: o->key_file = arg; return 0;
    case OPT_TARGET: o->target = arg; return 0;
    case OPT_SERVE: o->serve = arg; return 0;
    default:
        return NOT_MINE;
    }
}

/* --ssh and its company: the other end over ssh. */
static int parse_ssh_option(struct weir_options *o, int c, const char *arg,
                            struct weir_error *err)
{
    switch (c) {
    case OPT_SSH:
        /* a host that starts with '-' would be an option to ssh */
        if (!arg[0] || arg[0] == '-' || strpbrk(arg, " \t\n'\"\\;|&$`<>()"))
            return bad(err, "--ssh: '%s' is not [USER@]HOST", arg);
        o->ssh_host = arg;
        return 0;
    case OPT_RSH:
        if (!arg[0])
            return bad(err, "--rsh: empty command");
        o->rsh = arg;
        return 0;
    case OPT_REMOTE_WEIR:
        if (!arg[0])
            return bad(err, "--remote-weir: empty path");
        o->remote_weir = arg;
        return 0;
    case OPT_REMOTE:
        if (!arg[0])
            return bad(err, "--remote: empty command");
        o->remote_cmd = arg;
        return 0;
    case OPT_PULL:
        o->pull = true;
        o->input_given = true;   /* the remote end is the input */
        return 0;
    case OPT_REMOTE_OPTS: o->remote_opts = arg; return 0;
    case OPT_SSH_SERVER: o->ssh_server = true; return 0;
    case OPT_SSH_TUNNEL: case OPT_SSH_DIRECT: {
        int path = c == OPT_SSH_TUNNEL ? SSH_PATH_TUNNEL : SSH_PATH_DIRECT;
        if (o->ssh_path != SSH_PATH_AUTO && o->ssh_path != path)
            return bad(err, "--ssh-tunnel and --ssh-direct contradict each other");
        o->ssh_path = path;
        return 0;
    }
    case OPT_CONNECT_BACK: o->connect_back = true; return 0;
    default:
        return NOT_MINE;
    }
}

/* --link-test and the options of a test. */
static int parse_link_test_option(struct weir_options *o, int c, const char *arg,
                                  struct weir_error *err)
{
    switch (c) {
    case OPT_LINK_TEST: o->link_test = true; return 0;
    case OPT_ALLOW_LINK_TEST: o->allow_link_test = true; return 0;
    case OPT_DURATION: {
        char *end;
        errno = 0;
        double v = strtod(arg, &end);
        if (!plain_decimal(arg) || errno || end == arg || *end || !isfinite(v) ||
            v < LINKTEST_DURATION_MIN ||
            v > LINKTEST_DURATION_MAX)
            return bad(err, "--duration: '%s' is not a number of seconds from %g to %g", arg,
                       LINKTEST_DURATION_MIN, LINKTEST_DURATION_MAX);
        o->link_duration = v;
        return 0;
    }
    case OPT_PARALLEL:
        return parse_int("--parallel", arg, 1, LINKTEST_PARALLEL_MAX, &o->link_parallel, err);
    case OPT_SWEEP:
        if (o->link_sweep)
            return bad(err, "--sweep: given more than once");
        return parse_sweep(o, arg, err);
    default:
        return NOT_MINE;
    }
}

/* --adapt[=MIN:MAX]: zstd, its level moving within MIN to MAX. */
static int parse_adapt(struct weir_options *o, const char *arg, struct weir_error *err)
{
    o->compress = o->zstd = o->adapt = true;
    o->adapt_min = ADAPT_MIN_DEFAULT;
    o->adapt_max = ADAPT_MAX_DEFAULT;
    if (!arg)
        return 0;
    char lo[16], hi[16];
    const char *colon = strchr(arg + (arg[0] == '-'), ':');
    size_t n = colon ? (size_t)(colon - arg) : 0;
    if (!colon || n == 0 || n >= sizeof lo || strlen(colon + 1) >= sizeof hi)
        return bad(err, "--adapt: '%s' is not MIN:MAX (zstd levels, such as -5:15)", arg);
    memcpy(lo, arg, n);
    lo[n] = '\0';
    snprintf(hi, sizeof hi, "%s", colon + 1);
    if (parse_int("--adapt", lo, CODEC_ZSTD_LEVEL_MIN, CODEC_ZSTD_LEVEL_MAX, &o->adapt_min,
                  err) ||
        parse_int("--adapt", hi, CODEC_ZSTD_LEVEL_MIN, CODEC_ZSTD_LEVEL_MAX, &o->adapt_max,
                  err))
        return -1;
    if (o->adapt_min > o->adapt_max || o->adapt_min == 0 || o->adapt_max == 0)
        return bad(err, "--adapt: '%s' is no range of levels (MIN <= MAX, neither 0)", arg);
    return 0;
}

/* -z, -d and -T: compression and decoding. */
static int parse_compression_option(struct weir_options *o, int c, const char *arg,
                                    struct weir_error *err)
{
    switch (c) {
    case 'z':
        o->compress = o->lz4 = true;
        return arg ? parse_int("--compress", arg, 1, 12, &o->level, err) : 0;
    case OPT_ADAPT:
        return parse_adapt(o, arg, err);
    case OPT_ZSTD:
        o->compress = o->zstd = true;
        if (arg && parse_int("--zstd", arg, CODEC_ZSTD_LEVEL_MIN, CODEC_ZSTD_LEVEL_MAX,
                             &o->zstd_level, err))
            return -1;
        if (arg && o->zstd_level == 0)
            return bad(err, "--zstd: 0 is no level (1 to 19, or -1 to -100 for zstd's fast "
                       "modes)");
        return 0;
    case 'd':
        if (o->as_mbuffer)
            return bad(err, "-d: not supported: under the name mbuffer, -d is mbuffer's 'use "
                       "the device's block size'; give -s a multiple of it instead (weir -d, "
                       "decoding, is weir's own)");
        o->decode = true;
        return 0;
    case 'T':
        if (arg[0] < '0' || arg[0] > '9')
            return unsupported('T', err);   /* mbuffer's -T FILE */
        return parse_int("-T", arg, 1, 64, &o->threads, err);
    default:
        return NOT_MINE;
    }
}

/* What weir reports and how: --size, --progress, --interval, -q, -v, -l, -H,
 * --pid, -h and -V. */
static int parse_reporting_option(struct weir_options *o, int c, const char *arg,
                                  struct weir_error *err)
{
    switch (c) {
    case 'q': o->quiet = true; return 0;
    case 'v':
        if (!o->as_mbuffer) {
            o->verbosity++;
            return 0;
        } else {
            /* mbuffer's -v LEVEL: 0 none, 1 errors, 2 warnings, 3 information
             * (its default), 4 and up debugging */
            int level = 0;
            if (parse_int("-v", arg, 0, 6, &level, err))
                return -1;
            o->mbuffer_level = level;
            return 0;
        }
    case 'H': case OPT_MD5: o->hash = "md5"; return 0;
    case OPT_HASH: {
        /* fetched, not only named: OpenSSL 3 names digests (md4) that its
         * default provider cannot run */
        EVP_MD *md = EVP_MD_fetch(NULL, arg, NULL);
        EVP_MD_free(md);
        if (!md)
            return bad(err, "--hash: '%s' is not a digest this weir knows (md5, sha1, "
                       "sha256, sha512, blake2b512...)", arg);
        o->hash = arg;
        return 0;
    }
    case OPT_PID: o->print_pid = true; return 0;
    case 'l': o->log_path = arg; return 0;
    case OPT_SIZE:
        if (options_parse_size(arg, &o->expect_size) || o->expect_size == 0)
            return bad(err, "--size: '%s' is not a valid size", arg);
        return 0;
    case 'h': o->help = true; return 0;
    case 'V': o->version = true; return 0;
    case OPT_PROGRESS:
        return parse_progress(o, arg, err);
    case OPT_INTERVAL:
        if (parse_secs("--interval", arg, &o->interval, err))
            return -1;
        if (!(o->interval > 0))
            return bad(err, "--interval: '%s' is not a positive number of seconds", arg);
        return 0;
    default:
        return NOT_MINE;
    }
}

/* One option: each concern's step in turn, until one takes it. */
static int parse_one(struct weir_options *o, int c, const char *arg, struct raw_sizes *r,
                     bool *ct_given, struct weir_error *err)
{
    int rc = parse_io_option(o, c, arg, err);
    if (rc == NOT_MINE)
        rc = parse_network_option(o, c, arg, ct_given, err);
    if (rc == NOT_MINE)
        rc = parse_buffer_option(o, c, arg, r, err);
    if (rc == NOT_MINE)
        rc = parse_key_option(o, c, arg);
    if (rc == NOT_MINE)
        rc = parse_ssh_option(o, c, arg, err);
    if (rc == NOT_MINE)
        rc = parse_link_test_option(o, c, arg, err);
    if (rc == NOT_MINE)
        rc = parse_compression_option(o, c, arg, err);
    if (rc == NOT_MINE)
        rc = parse_reporting_option(o, c, arg, err);
    return rc == NOT_MINE ? -1 : rc;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* What follows the options: the command after "--" (a producer, or with
 * an input a consumer), or nothing. */
static int take_command(struct weir_options *o, int argc, char **argv, const char *last_arg,
                        struct weir_error *err)
{
    bool dashdash = optind > 1 && optind <= argc && strcmp(argv[optind - 1], "--") == 0 &&
                    argv[optind - 1] != last_arg;
    if (dashdash) {
        if (optind == argc || !argv[optind][0])
            return bad(err, "--: no command after it (weir -O host:port -- zfs send ...)");
        o->command = argv + optind;
        /* with an input, the command consumes what weir reads; without
         * one, it produces what weir reads */
        o->command_consumes = o->input_given;
    } else if (optind < argc) {
        return bad(err, "unexpected argument '%s' (inputs and outputs take -i, -o, -I, -O; "
                   "a command to run comes after --)", argv[optind]);
    }
    return 0;
}

/* Under the name mbuffer, -v LEVEL: 0 and 1 are quiet, 4 and up verbose. */
static void apply_mbuffer_level(struct weir_options *o)
{
    if (o->mbuffer_level >= 0 && o->mbuffer_level <= 1)
        o->quiet = true;
    if (o->mbuffer_level >= 4) {
        o->verbosity = o->mbuffer_level - 3;
        o->quiet = false;   /* mbuffer's -q hides its status line, not its messages */
    }
}

int options_parse(int argc, char **argv, struct weir_options *o, struct weir_error *err)
{
    struct raw_sizes r = {0};
    bool ct_given = false;
    defaults(o);
    opterr = 0;
    optind = 0;   /* glibc: 0 also resets getopt's internal state */
    int c;
    const char *last_arg = NULL;
    /* '+': stop at the first non-option, so that "--" and what follows it
     * (the producer's or consumer's own arguments) are left as they are */
    /* under the name mbuffer, -v takes mbuffer's verbose level */
    o->as_mbuffer = argc > 0 && argv[0] && strcmp(base_name(argv[0]), "mbuffer") == 0;
    const char *optstring = o->as_mbuffer
        ? "+:i:o:I:O:m:s:b:P:p:r:R:fqv:l:e46zdT:hVn:A:a:D:tW:HcLu:Q0"
        : "+:i:o:I:O:m:s:b:P:p:r:R:fqvl:e46zdT:hVn:A:a:D:tW:HcLu:Q0";
    while ((c = getopt_long(argc, argv, optstring, long_opts, NULL)) != -1) {
        if (c == '?') {
            if (optopt && optopt < 256)
                return error_set(err, WEIR_EXIT_USAGE, "unknown option '-%c' (see weir -h)",
                                 optopt);
            return error_set(err, WEIR_EXIT_USAGE, "unknown option '%s' (see weir -h)",
                             argv[optind - 1]);
        }
        if (c == ':') {
            if (optopt && optopt < 256)
                return error_set(err, WEIR_EXIT_USAGE, "option '-%c' needs a value", optopt);
            return error_set(err, WEIR_EXIT_USAGE, "option '%s' needs a value",
                             argv[optind - 1]);
        }
        last_arg = optarg;
        if (parse_one(o, c, optarg, &r, &ct_given, err))
            return -1;
    }
    if (take_command(o, argc, argv, last_arg, err))
        return -1;
    if (o->help || o->version)
        return 0;
    if (o->as_mbuffer)
        apply_mbuffer_level(o);
    if (o->input_path && strcmp(o->input_path, "-") == 0)
        o->input_path = NULL;
    if (resolve_sizes(o, &r, err) || check_conflicts(o, ct_given, err) ||
        check_link_test(o, &r, err) || check_progress(o, err))
        return -1;
    return 0;
}

/* The outputs in the order given, then a consuming command's, then the
 * digest's. */
static void outputs_to_config(const struct weir_options *o, struct weir_config *c)
{
    for (int i = 0; i < o->noutputs; i++) {
        const struct output_spec *s = &o->outputs[i];
        struct weir_output *d = &c->outputs[c->noutputs++];
        if (s->kind == OUTPUT_TCP) {
            d->kind = WEIR_OUT_TCP;
            snprintf(d->host, sizeof d->host, "%s", s->host);
            snprintf(d->port, sizeof d->port, "%s", s->port);
        } else if (strcmp(s->path, "-") == 0) {
            d->kind = WEIR_OUT_STDOUT;
        } else {
            d->kind = WEIR_OUT_FILE;
            d->path = s->path;
        }
    }
    if (o->command && o->command_consumes)
        c->outputs[c->noutputs++].kind = WEIR_OUT_COMMAND;
    if (o->hash) {
        /* the digest is one more reader of the buffer; standard output
         * stays the output when no other was named */
        if (c->noutputs == 0)
            c->outputs[c->noutputs++].kind = WEIR_OUT_STDOUT;
        c->outputs[c->noutputs].kind = WEIR_OUT_DIGEST;
        c->outputs[c->noutputs++].path = o->hash;
    }
}

void options_to_config(const struct weir_options *o, struct weir_config *c)
{
    weir_config_defaults(c);
    c->input = o->listen ? WEIR_IN_LISTEN
               : o->command && !o->command_consumes ? WEIR_IN_COMMAND
               : o->input_path ? WEIR_IN_FILE : WEIR_IN_STDIN;
    c->input_path = o->input_path;
    c->command = o->command;
    outputs_to_config(o, c);
    c->dsync = o->dsync;
    c->watchdog = o->watchdog;
    /* under the name mbuffer the peer may be mbuffer, nc or socat: plain
     * bytes are taken, and sent to a receiver that does not greet */
    c->listen_plain_too = o->as_mbuffer && !o->raw && !o->key_file;
    c->plain_after = o->as_mbuffer && !o->key_file && !o->compress ? MBUFFER_PLAIN_AFTER : 0;
    c->mem = o->mem;
    c->block = o->block;
    c->start_write_pct = o->start_write_pct;
    c->resume_read_pct = o->resume_read_pct;
    c->read_rate = o->read_rate;
    c->write_rate = o->write_rate;
    c->readahead = o->readahead;
    c->compress = o->compress;
    c->zstd = o->zstd;
    c->adapt = o->adapt;
    c->adapt_min = o->adapt_min;
    c->adapt_max = o->adapt_max;
    c->level = !o->zstd ? o->level : o->zstd_level ? o->zstd_level : OPTIONS_ZSTD_LEVEL;
    c->decode = o->decode;
    c->threads = o->threads;
    c->sparse = o->sparse;
    c->tcp.family = o->family;
    c->tcp.connect_timeout = o->connect_timeout;
    c->tcp.accept_timeout = o->accept_timeout;
    c->tcp.io_timeout = o->io_timeout;
    c->reconnect = o->reconnect;
    c->streams = o->streams;
    c->tcp.raw = o->raw;
    c->tcp.bind_addr = o->bind_addr;
    snprintf(c->tcp.listen_port, sizeof c->tcp.listen_port, "%s", o->listen_port);
    snprintf(c->tcp.allow_host, sizeof c->tcp.allow_host, "%s", o->allow_host);
    c->force = o->force;
    c->stop_on_error = o->stop_on_error;
    c->no_sync = o->no_sync;
    c->expect_size = o->expect_size;
    c->stdin_closed = o->stdin_closed;
    c->stdout_closed = o->stdout_closed;
    c->stdout_null = o->stdout_null;
    c->log_path = o->log_path;
    c->key_file = o->key_file;
    c->key_id = o->key_id;
    c->target = o->target;
    c->allow_link_test = o->allow_link_test;
}

void options_to_linktest(const struct weir_options *o, struct linktest_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "%s", o->outputs[0].host);
    snprintf(c->port, sizeof c->port, "%s", o->outputs[0].port);
    c->tcp.family = o->family;
    c->tcp.connect_timeout = o->connect_timeout;
    c->tcp.io_timeout = o->io_timeout;
    c->key_file = o->key_file;
    c->key_id = o->key_id;
    c->duration = o->link_duration;
    c->parallel = o->link_parallel;
    memcpy(c->sizes, o->link_sizes, sizeof c->sizes);
    c->nsizes = o->link_nsizes;
}
