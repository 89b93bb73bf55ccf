/*
 * options.h - the command line, turned into a struct weir_options.
 *
 * Contract: options_parse() is the only code that sees argv.  It validates
 * every value and rejects every conflicting combination before weir does any
 * I/O, so the engine can trust what it is given.  On failure it fills a
 * weir_error with status WEIR_EXIT_USAGE and a precise message.  It is called
 * once, by main(), before any thread exists.  Strings point into argv.
 * options_to_config() turns the result into the engine's own configuration
 * (weir.h): the engine never sees this struct, nor argv.
 */
#ifndef WEIR_OPTIONS_H
#define WEIR_OPTIONS_H

#define OPTIONS_ZSTD_LEVEL 3   /* --zstd without a level */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "linktest/linktest.h"
#include "weir/error.h"
#include "weir/weir.h"

#define OPTIONS_MAX_SECS 2147483               /* seconds, so that ms fit an int */
#define OPTIONS_MAX_READAHEAD (1ULL << 50)     /* 1 PiB */
/* Under the name mbuffer, a receiver that has not greeted within this many
 * seconds is taken for mbuffer, nc or socat, and gets plain bytes. */
#define MBUFFER_PLAIN_AFTER 3.0

enum output_kind { OUTPUT_FILE, OUTPUT_TCP };

struct output_spec {
    enum output_kind kind;
    const char *path;    /* OUTPUT_FILE: a path, or "-" for stdout */
    char host[256];      /* OUTPUT_TCP: host name or address literal */
    char port[16];       /* OUTPUT_TCP: port */
};

struct weir_options {
    const char *input_path;     /* -i, NULL or "-" for stdin */
    bool listen;                /* -I given */
    char listen_port[16];       /* -I [HOST:]PORT */
    char allow_host[256];       /* -I HOST:PORT: the only peer allowed, or "" */
    const char *bind_addr;      /* --bind */
    struct output_spec outputs[WEIR_MAX_OUTPUTS];
    int noutputs;               /* 0 means stdout */

    uint64_t mem;               /* -m: bytes of buffer */
    uint64_t block;             /* -s: bytes per block */
    uint64_t nblocks;           /* mem / block */
    int start_write_pct;        /* -P, 0 = at once */
    int resume_read_pct;        /* -p, 100 = when a block is free */
    uint64_t read_rate;         /* -r, bytes/s, 0 = unlimited */
    uint64_t write_rate;        /* -R, bytes/s, 0 = unlimited */
    uint64_t expect_size;       /* --size, 0 = unknown */
    uint64_t readahead;         /* --readahead: how far a regular file is read ahead */

    bool force;                 /* -f */
    bool quiet;                 /* -q */
    int verbosity;              /* -v */
    const char *log_path;       /* -l */
    bool stop_on_error;         /* --stop-on-error, -e */
    int family;                 /* AF_UNSPEC, AF_INET (-4), AF_INET6 (-6) */
    double connect_timeout;     /* --connect-timeout, seconds, 0 = one try */
    double accept_timeout;      /* --accept-timeout, seconds, 0 = forever */
    double io_timeout;          /* --timeout, seconds without progress, 0 = off */
    double reconnect;           /* --reconnect, seconds a broken connection is waited for */
    int streams;                /* --streams: connections per -O transfer; 0 = auto */
    bool streams_given;

    bool raw;                   /* --raw: plain bytes on the wire */
    bool compress;              /* -z, --compress, or --zstd */
    bool lz4, zstd;             /* which of them */
    int level;                  /* compression level, 1 = fast LZ4 */
    int zstd_level;             /* --zstd's, or 0: OPTIONS_ZSTD_LEVEL */
    bool adapt;                 /* --adapt: the level follows the bottleneck */
    int adapt_min, adapt_max;   /* within this range */
    bool decode;                /* -d */
    bool sparse;                /* --sparse: runs of zeros in the input are holes */
    int threads;                /* -T */

    bool no_sync;               /* --no-sync: do not flush outputs to stable storage */
    const char *genkey;         /* --genkey FILE: write a new key file and exit */
    const char *key_id;         /* --key-id NAME */
    const char *key_file;       /* --key-file FILE: authenticate and encrypt */
    const char *target;         /* --target NAME: the service's target to send to */
    const char *serve;          /* --serve FILE: run as a service (serve.h) */
    bool input_given;           /* -i (even -i -) or -I: a command is then the consumer */
    char **command;             /* after --: the producer or consumer, NULL-ended */
    bool command_consumes;      /* the command is the consumer (weir has an input) */

    /* Not from argv: main() found these standard descriptors closed at
     * startup and put /dev/null there, so using one is an error. */
    bool stdin_closed, stdout_closed;
    /* Descriptor 1 is that /dev/null (stdout_closed may also be set when
     * descriptor 1 is merely not the transfer's, as in --ssh-server): a
     * consumer gets its standard output closed, as a shell would leave it. */
    bool stdout_null;

    /* mbuffer compatibility (man weir, COMPATIBILITY) */
    bool as_mbuffer;            /* run under the name mbuffer (argv[0]) */
    double watchdog;            /* -W: seconds without progress anywhere, 0 = off */
    const char *hash;           /* -H, --md5 (md5), --hash ALGO: a digest of the data */
    bool print_pid;             /* --pid */
    bool dsync;                 /* -c: file outputs written with O_DSYNC */
    bool lock_memory;           /* -L: the buffer locked in memory */
    int mbuffer_level;          /* mbuffer's -v LEVEL, or -1 */

    bool help;                  /* -h: print usage and exit 0 */
    bool version;               /* -V: print version and exit 0 */

    /* --progress=json[=FD|=PATH], --interval: JSON lines (progress.h) */
    bool progress;              /* --progress given */
    bool progress_to_fd;        /* to the descriptor progress_fd */
    int progress_fd;
    const char *progress_path;  /* to this file; neither: standard error */
    double interval;            /* seconds between lines (default 1) */

    /* --ssh: the other end started over ssh (remote.h) */
    const char *ssh_host;       /* --ssh [USER@]HOST */
    const char *rsh;            /* --rsh CMD, NULL: ssh */
    const char *remote_weir;    /* --remote-weir PATH, NULL: weir */
    const char *remote_cmd;     /* --remote CMD */
    const char *remote_opts;    /* --remote-opts OPTS */
    bool pull;                  /* --pull: the remote end sends */
    int ssh_path;               /* SSH_PATH_*: --ssh-tunnel, --ssh-direct */
    bool connect_back;          /* --connect-back: the remote end connects */
    bool ssh_server;            /* --ssh-server: this is that remote end */
    /* --link-test (linktest.h): measure the link to the -O listener */
    bool link_test;
    bool allow_link_test;       /* -I: serve link tests without a key too */
    double link_duration;       /* --duration: seconds a measurement; 0: not given */
    int link_parallel;          /* --parallel: connections each way; 0: not given */
    const char *link_sweep;     /* --sweep as given, or NULL */
    uint32_t link_sizes[LINKTEST_SIZES_MAX];
    int link_nsizes;
};

/* How --ssh moves the data: directly, falling back to the ssh connection
 * (auto), or only one of the two. */
enum { SSH_PATH_AUTO, SSH_PATH_TUNNEL, SSH_PATH_DIRECT };

int options_parse(int argc, char **argv, struct weir_options *o, struct weir_error *err);
/* The engine's configuration from parsed options (main() fills in what the
 * parser cannot know: the closed standard descriptors). */
void options_to_config(const struct weir_options *o, struct weir_config *c);
void options_usage(FILE *out);
/* A link test's configuration from parsed options (--link-test). */
void options_to_linktest(const struct weir_options *o, struct linktest_config *c);

/* Parse "12", "4k", "1.5G", "64MiB" (binary multiples).  Returns -1 if malformed. */
int options_parse_size(const char *s, uint64_t *out);

#endif
