/*
 * stats.h - what the engine can say about a transfer while it runs: the
 * snapshot that the status line and the summary are made of.
 *
 * Contract: the engine fills a struct stats_snapshot under its lock
 * (weir_snapshot); the command line formats it (report.h).
 *
 * "data" bytes are the bytes of the user's stream; "holes" are the part of
 * them that is runs of zeros carried as lengths (sparse files, --sparse),
 * never read, sent or written as bytes where weir can help it; "wire" bytes
 * are what an endpoint carried when that differs (compressed or framed as a
 * weir stream).  The buffer "fill" is the share of the buffer's capacity
 * held by data that the slowest live output has not written yet.  "net"
 * bytes are what crossed weir's connections in the data's direction,
 * counted at the socket: weir's framing and encryption included.
 *
 * Strings in a snapshot are the engine's, valid until weir_destroy().
 */
#ifndef WEIR_STATS_H
#define WEIR_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATS_MAX_OUTPUTS 16

/* Where the transfer is, as a whole. */
enum stats_phase {
    STATS_CONNECTING,     /* an output is still connecting to its receiver */
    STATS_WAITING,        /* no byte has come in yet: the input or the sender */
    STATS_TRANSFERRING,   /* the input is being read */
    STATS_DRAINING,       /* the input ended; outputs write what the buffer holds */
    STATS_ANSWER,         /* everything is written; a receiver's answer or a
                             consumer's exit is awaited */
    STATS_STOPPING,       /* a failure or a signal stops the engine */
    STATS_DONE,           /* every thread has returned */
};

/* Where one output is. */
enum stats_output_state {
    STATS_OUT_CONNECTING,   /* -O: connecting, greeting, the handshake */
    STATS_OUT_WRITING,      /* taking data as it comes */
    STATS_OUT_FLUSHING,     /* flushing to stable storage after the last byte */
    STATS_OUT_ANSWER,       /* the stream is sent: awaiting the receiver's answer */
    STATS_OUT_CONSUMER,     /* its input is closed: awaiting the consumer's exit */
    STATS_OUT_DONE,         /* complete */
    STATS_OUT_FAILED,       /* it failed (its error was reported) */
    STATS_OUT_STOPPED,      /* stopped unfinished by another failure or a signal */
};

/* One TCP connection's path. */
#define STATS_MAX_STREAMS 16
struct stats_path {
    bool known;            /* sampled at least once */
    double rtt_ms;
    uint32_t cwnd;         /* segments */
    uint64_t retrans;      /* segments sent again */
    uint64_t delivery_rate;   /* bytes a second */
};

struct stats_output {
    const char *name;      /* as messages name it: "output /mnt/x", "consumer 'cmd'" */
    const char *kind;      /* "file", "stdout", "connection", "command" or "digest" */
    uint64_t bytes;        /* bytes of the buffer it has written */
    uint64_t holes;        /* hole bytes it has passed (seeked over or written as zeros) */
    uint64_t net_bytes;    /* a connection: bytes it sent on it, at the socket */
    unsigned reconnections;   /* a connection: how often it was made again (--reconnect) */
    enum stats_output_state state;
    /* a connection: how many TCP connections carry it (0: not a
     * connection), and what the system says of each one's path, as last
     * sampled by its writer (figures it cannot give are unknown: rtt_ms
     * < 0, cwnd 0, retrans UINT64_MAX, delivery_rate 0) */
    unsigned streams;
    struct stats_path paths[STATS_MAX_STREAMS];
};

struct stats_snapshot {
    double elapsed;        /* seconds since the input was opened */
    uint64_t in_bytes;     /* bytes read from the input endpoint */
    uint64_t out_bytes;    /* bytes written by the slowest live output */
    uint64_t data_bytes;   /* bytes of the user's data seen so far, holes included */
    uint64_t hole_bytes;   /* of which holes: runs of zeros that were not read or sent */
    uint64_t wire_bytes;   /* bytes on the wire side, when a transform runs */
    bool transform;        /* compression or decoding is active */
    bool decoding;         /* the transform decodes the input (else, if any, -z) */
    const char *codec;     /* with a transform: "lz4" or "zstd" */
    int level;             /* compressing: the level it uses; decoding: 0 */
    bool storing;          /* --adapt: it stores blocks now (level 0) */
    bool adapt;            /* --adapt: the level moves; the blocks so far used */
    int level_min, level_max;   /* these levels (min > max: none yet) */
    bool stored;           /* and some were stored, not compressed */
    uint64_t held;         /* bytes held in the buffer */
    uint64_t capacity;     /* bytes the buffer can hold */
    double t_empty;        /* seconds the buffer was empty (input side slower) */
    double t_full;         /* seconds the reader waited for space (output slower) */
    uint64_t expect;       /* --size, or 0 */
    double t_input_end;    /* seconds from start to the end of input, or 0 */
    double t_workers;      /* seconds the outputs waited for the transform workers */
    const char *workers_name;   /* "compression" or "decoding" */
    const char *waiting;   /* after the input: what the end still waits for, or NULL */
    uint64_t peer_written; /* a weir receiver's keepalives: what its outputs wrote (the
                              slowest receiver's, with several) */
    uint64_t net_bytes;    /* crossed the connections (-I read, -O sent) */
    uint64_t input_size;   /* a regular-file input's size when opened, or 0 */
    enum stats_phase phase;
    /* --reconnect: connections made again after a break, at either end of
     * this engine, and the time spent without one (a gap under way
     * included); reconnecting: a gap is under way */
    unsigned reconnections;
    double gap_secs;
    bool reconnecting;
    bool failed;           /* the first error is in (the transfer cannot succeed) */
    const char *failure;   /* its message when failed, else NULL */
    unsigned streams;      /* the most TCP connections one transfer here uses (the
                              input's, or an output's: --streams), 0 or 1: one */
    int noutputs;
    struct stats_output outputs[STATS_MAX_OUTPUTS];
};

#endif
