/*
 * weir.h - the engine: one input, one or more outputs, the buffer between
 * them, optional LZ4 and the verified weir stream.  This is the library's
 * one public header; the command line (src/cli/main.c, src/cli/options.c,
 * src/cli/report.c) is one user of it and the unit tests are another.
 *
 * Contract: fill a struct weir_config (weir_config_defaults() first), then
 * call weir_create() from the thread that will run the engine.  It checks
 * and opens everything that can fail before a byte moves: it reserves the
 * buffer, opens the input file or binds the listening socket, starts the
 * producer or consumer commands, opens and checks file outputs.  Then
 * weir_run() starts the threads, takes the signals of weir_signals_block()
 * synchronously, calls the observer's status callback, joins everything and
 * returns the exit status; weir_snapshot() may be called at any time,
 * weir_destroy() frees what is left.  Nothing here exits or prints except
 * through the weir_log given (messages) and the observer (status).
 *
 * The engine's threads are explained at the top of src/engine/pipeline.c.
 */
#ifndef WEIR_WEIR_H
#define WEIR_WEIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/error.h"
#include "weir/log.h"
#include "weir/stats.h"

#define WEIR_MAX_OUTPUTS 16

enum weir_input_kind {
    WEIR_IN_STDIN,      /* standard input */
    WEIR_IN_FILE,       /* a path */
    WEIR_IN_LISTEN,     /* -I: a sender admitted on a listening socket */
    WEIR_IN_COMMAND,    /* the producer: a command whose standard output is read */
};

enum weir_output_kind {
    WEIR_OUT_STDOUT,
    WEIR_OUT_FILE,
    WEIR_OUT_TCP,       /* -O HOST:PORT */
    WEIR_OUT_COMMAND,   /* the consumer: a command whose standard input is written */
    WEIR_OUT_DIGEST,    /* -H, --hash: a message digest of the data, logged at the end */
};

struct weir_output {
    enum weir_output_kind kind;
    const char *path;            /* WEIR_OUT_FILE; WEIR_OUT_DIGEST: the algorithm */
    char host[256];              /* WEIR_OUT_TCP */
    char port[16];
    /* WEIR_OUT_TCP: a connection already made (by --ssh: a socket, or the
     * ssh channel itself), which the engine takes over instead of
     * connecting; host is then what messages call it */
    bool connected;
    int fd;
    /* connected, resumable: how to make the connection again after a break
     * (the ssh tunnel: through a new ssh session), within timeout seconds,
     * giving up when *stop is set.  0 with *fd, or -1 with errno
     * (ECONNREFUSED: the receiver is gone; ECANCELED: stopped) and *err.
     * NULL: connect again to the address the connection reached. */
    int (*redial)(void *ctx, double timeout, _Atomic bool *stop, int *fd,
                  struct weir_error *err);
    void *redial_ctx;
};

/* How weir's TCP connections are made and tuned (the transport's tcp.h
 * takes them as they are). */
struct tcp_settings {
    int family;                 /* AF_UNSPEC, AF_INET (-4) or AF_INET6 (-6) */
    double connect_timeout;     /* seconds to keep retrying; 0 = one attempt */
    bool refusal_final;         /* the peer listens already: a refusal is not retried */
    double accept_timeout;      /* seconds a listener waits; 0 = for ever */
    double io_timeout;          /* seconds without progress; 0 = off */
    bool raw;                   /* plain bytes: no greeting, no weir stream */
    const char *bind_addr;      /* listen on this address only, or NULL */
    char listen_port[16];
    char allow_host[256];       /* the only peer allowed, or "" */
};

struct listener_admitted;   /* link/listener.h: a connection admitted already */
struct tls_context;         /* crypto/tls.h */

struct weir_config {
    enum weir_input_kind input;
    const char *input_path;      /* WEIR_IN_FILE */
    char *const *command;        /* WEIR_IN_COMMAND or one WEIR_OUT_COMMAND: argv, NULL-ended */
    struct weir_output outputs[WEIR_MAX_OUTPUTS];
    int noutputs;

    /* the buffer */
    uint64_t mem;                /* bytes */
    uint64_t block;              /* bytes per block */
    int start_write_pct;         /* -P, 0 = at once */
    int resume_read_pct;         /* -p, 100 = when a block is free */
    uint64_t read_rate;          /* bytes/s, 0 = unlimited */
    uint64_t write_rate;
    uint64_t readahead;          /* how far a regular file is read ahead */

    /* compression and the stream */
    bool compress;               /* LZ4: one frame to files, pipes and commands, the
                                    weir stream to weir connections */
    bool zstd;                   /* with compress: zstd frames in the weir stream, to
                                    every output (a zstd file to files and pipes) */
    int level;                   /* LZ4: 1 to 12; zstd: -100 to 19, not 0 */
    bool adapt;                  /* with zstd: the level follows the bottleneck, */
    int adapt_min, adapt_max;    /*   within this range (adapt.h) */
    bool decode;                 /* -d: the input must be a weir stream or LZ4 */
    int threads;
    /* holes: a regular-file input is always read by its data extents; with
     * sparse, every grain of zeros (sparse.h) in what is read as it is
     * becomes a hole too, whatever the input */
    bool sparse;

    /* connections */
    struct tcp_settings tcp;
    /* seconds a connection between two weirs that broke (a reset, a cut,
     * --timeout, the receiver's silence) is waited for: the sender
     * reconnects and resumes where the receiver stopped, the receiver keeps
     * its outputs open and listens for it; 0: a break fails the transfer */
    double reconnect;
    /* --streams: how many TCP connections carry each -O transfer to a weir
     * receiver that offers it (CODEC_FEATURE_STREAMS): 0 auto (one for
     * every 12.5 ms of the first connection's round trip, at most 8), 1
     * one, up to 16; a receiver given 1 does not offer it */
    int streams;

    bool force;                  /* an existing regular output file may be overwritten */
    bool stop_on_error;          /* the first failed output stops everything */
    bool no_sync;                /* do not flush outputs to stable storage */
    bool dsync;                  /* file outputs are opened O_DSYNC (mbuffer -c) */
    double watchdog;             /* -W: fail after this many seconds in which neither the
                                    input nor any output moved a byte; 0 = off */
    uint64_t expect_size;        /* for the ETA; 0 = unknown */
    /* standard descriptors found closed at startup (main put /dev/null there) */
    bool stdin_closed, stdout_closed;
    bool stdout_null;            /* descriptor 1 is that /dev/null: a consumer gets it closed */
    const char *log_path;        /* the -l file, so that no output may be it */
    /* A descriptor the caller writes beside the outputs (the command line's
     * --progress target): no input, output or -l file may be its file.
     * -1 (weir_config_defaults): none. */
    int progress_fd;
    /* -I 0: the caller hands the port on (weir_listen_port), so the engine
     * does not say it at -q */
    bool port_told;
    const char *progress_name;   /* how messages name it: "progress FILE" */

    /* peers that are not weir (mbuffer, nc, socat): a listener that admits
     * plain bytes as well as weir senders, and a sender that sends plain
     * bytes to a receiver that has not greeted within plain_after seconds
     * (0: such a sender fails) */
    bool listen_plain_too;
    double plain_after;

    /* WEIR_IN_LISTEN: a connection already made (the ssh channel, or a socket
     * --ssh connected), which the engine takes over and admits like one the
     * listening socket accepted, beside it; with tcp.listen_port empty there
     * is no listening socket.  channel_trusted: the connection is ssh's
     * (authenticated and encrypted by ssh), and its sender has no key.
     * -1 (weir_config_defaults): none. */
    int channel_fd;
    bool channel_trusted;
    /* WEIR_IN_LISTEN with tcp.listen_port empty: a listening socket the
     * caller made (the one --ssh's connection came in on), which the engine
     * takes over as -I's own; a resumable session's sender comes back to
     * it.  tcp.allow_host still applies.  -1 (weir_config_defaults): none. */
    int listen_fd;
    /* WEIR_IN_LISTEN, a connection given that this end dialled (--ssh): how
     * to reach the sender again after a break, as weir_output.redial says;
     * the sender then waits to be reached.  NULL: it comes back here. */
    int (*input_redial)(void *ctx, double timeout, _Atomic bool *stop, int *fd,
                        struct weir_error *err);
    void *input_redial_ctx;
    const char *channel_name;    /* what messages call it */
    /* WEIR_IN_LISTEN with tcp.listen_port empty: a sender admitted already
     * (weir --serve, link/listener.h), which the engine takes as its input,
     * with nothing listening beside it.  NULL: none. */
    struct listener_admitted *admitted;
    /* with admitted: listen_fd is the service's socket on which a sender
     * that comes back arrives (tcp.h, handoff), and route the number the
     * sender gives then (weir --serve; 0: none) */
    bool listen_handoff;
    uint32_t route;
    /* with admitted: the handshake a sender that comes back must pass (the
     * caller's, crypto/tls.h; it outlives the engine) */
    struct tls_context *admit_tls;
    /* -O with a key: the target to ask a service (weir --serve) for; NULL:
     * the first of this key's own */
    const char *target;

    /* keys: connections are authenticated and encrypted (tls.h, seal.h) */
    const char *key_file;
    const char *key_id;          /* the sender's key; NULL: the file's first */
    /* or the keys as a key file's text in memory (--ssh's one-time key),
     * read by weir_create(); the caller wipes it */
    const char *key_text;
    size_t key_text_len;
    uint64_t epoch_records;      /* records per key epoch; 0: SEAL_EPOCH_RECORDS */

    /* a listener serves link tests (linktest.h) without a key as well */
    bool allow_link_test;
};

/* What the engine reports while it runs.  status() is called from the
 * engine's thread: every interval seconds (0: never) with whole_line false,
 * and at once with whole_line true when SIGUSR1 asks for it. */
struct weir_observer {
    void (*status)(void *ctx, const struct stats_snapshot *prev,
                   const struct stats_snapshot *now, bool whole_line);
    void *ctx;
    double interval;
};

struct weir_engine;

void weir_config_defaults(struct weir_config *c);
/* Block the signals the engine takes synchronously (SIGINT, SIGTERM, SIGHUP,
 * SIGUSR1, and its wake-up signal SIGUSR2) and ignore SIGPIPE.  Call before
 * any thread exists. */
int weir_signals_block(struct weir_error *err);
int weir_create(const struct weir_config *c, struct weir_log *log, struct weir_engine **out,
                struct weir_error *err);
int weir_run(struct weir_engine *e, const struct weir_observer *obs);
void weir_snapshot(struct weir_engine *e, struct stats_snapshot *s);
/* From any thread while weir_run() runs: fail the transfer with this status
 * and message, as one of the engine's own threads would (the first failure
 * wins; weir_run() then stops everything and returns). */
void weir_fail(struct weir_engine *e, int status, const char *msg);
/* After weir_create, with a listening input: the port it listens on. */
int weir_listen_port(const struct weir_engine *e);
/* While weir_run() runs: whether a break of the transfer's connection would
 * now be resumed (a session named by the receiver, --reconnect). */
bool weir_resumable(struct weir_engine *e);
/* While weir_run() runs: whether the whole stream has crossed its
 * connection (received and verified; or, sending, every connection's
 * trailer sent): what is left is the outputs' and the answer's. */
bool weir_stream_whole(struct weir_engine *e);
/* After weir_run: whether every output was complete. */
bool weir_succeeded(const struct weir_engine *e);
void weir_destroy(struct weir_engine *e);

#endif
