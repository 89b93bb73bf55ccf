/*
 * session.h - the weir stream between two weirs over one transport: the
 * greetings, the stream header, raw data framed as stored blocks, the
 * trailer and the abort on the way out; the keepalives and the final answer
 * on the way back (doc/stream-format.md).
 *
 * Contract: a struct session_out belongs to the writer of one output (its
 * back-channel thread only reads records with session_read_record); a
 * struct session_in belongs to the engine's main thread, which alone writes
 * to a weir sender.  Failures are weir_errors naming the transport; a
 * function that is stopped (*stop set) fails with errno ECANCELED and
 * leaves *err alone.  Records are parsed by codec_parse_record, the one
 * parser of every record type.
 */
#ifndef WEIR_SESSION_H
#define WEIR_SESSION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "format/codec.h"
#include "transport/transport.h"
#include "weir/error.h"

/* ---- the sending side ---- */

struct session_out {
    struct transport *t;
    bool greet;              /* a weir receiver: greetings and an answer */
    bool frame;              /* raw data is framed as stored blocks (no -z) */
    bool compressed;         /* -z: the buffer holds the stream's blocks */
    bool zstd;               /* --zstd: and they are zstd frames (set after init) */
    bool unsummed;           /* sealed: stored blocks go without checksums */
    uint32_t block_max;      /* the header's */
    unsigned version;        /* the header's: 2 when the receiver takes holes */
    uint64_t seq, total, chain;   /* the stored blocks (and holes) framed so far */
    bool spoke;              /* the stream's first bytes were written */
    bool greeted;            /* the greeting went out already (before a handshake) */
    uint32_t peer_features;  /* what the receiver's greeting offers */
    bool peer_silent;        /* no greeting: the peer sent nothing at all in time */
    bool tester;             /* a link tester's: no hint at --raw when it is not weir */
    bool rejoining;          /* a resuming sender's: the peer was a weir, no hint either */
    bool resume;             /* it offers resuming (--reconnect) in its greeting */
    bool reread;             /* and says it reads again what it resends (CODEC_FEATURE_REREAD) */
    bool spread;             /* it spreads the stream over several connections
                                (CODEC_FEATURE_STREAMS; set only when the receiver offers it) */
    bool grow;               /* and begins with one, adding more while it runs
                                (CODEC_FEATURE_GROW; the receiver offers it) */
    /* --target: the target it asks a service for (NULL: none); to a
     * service (CODEC_FEATURE_SERVE) a 'P' record follows the header in the
     * same write, so in the same sealed record */
    const char *target;
    /* a service's route to this transfer ('N'), put in the greeting of a
     * connection that comes back (codec_greeting_routed); 0: none */
    uint32_t route;
    /* the stream's bytes (from its header on, before any encryption) that
     * were written: a resumed connection starts from where the receiver
     * stopped; skip: bytes of the next writes the receiver holds already
     * (they are counted, not sent) */
    uint64_t sent, skip;
    /* a frame whose write was interrupted: what is left of it */
    unsigned char prefix[CODEC_FRAME_PREFIX], suffix[CODEC_FRAME_SUFFIX];
    unsigned char hole[CODEC_HOLE_SIZE];
    struct iovec pending[3];
    int npending;
};

/* A peer that keeps talking (a receiver's keepalives, a sender's data)
 * and is silent this long has a broken connection: SESSION_SILENCE_SECS,
 * or a shorter --timeout (io_timeout, 0: none), but at least
 * CODEC_SILENCE_MIN, four keepalives. */
#define SESSION_SILENCE_SECS 10.0
double session_silence(double io_timeout);

void session_out_init(struct session_out *s, struct transport *t, bool greet, bool frame,
                      bool compressed, uint32_t block_max);
/* Read the receiver's greeting, within limit seconds.  A peer that sends
 * nothing or something else "does not seem to be weir"; peer_silent then
 * says whether it sent nothing at all (mbuffer, nc and socat do not greet). */
int session_read_greeting(struct session_out *s, double limit, atomic_bool *stop,
                          struct weir_error *err);
/* A sender with a key: its greeting, alone, before the handshake. */
int session_greet_keyed(struct session_out *s, int timeout_ms, atomic_bool *stop,
                        struct weir_error *err);
/* Write the sender's greeting (when greet, unless it went out already) and
 * the stream header (when the stream is framed or compressed), in one
 * write.  The header is version 2 when the receiver's greeting offers
 * holes, else version 1 (which cannot carry them). */
int session_begin(struct session_out *s, int timeout_ms, atomic_bool *stop,
                  struct weir_error *err);
/* A resumed connection (after session_rejoin): the stream header again,
 * what the receiver lacks of it. */
int session_resend_header(struct session_out *s, int timeout_ms, atomic_bool *stop,
                          struct weir_error *err);
/* Write some of iov as the stream's next bytes (skip first, then the
 * transport): the bytes it took (counted in sent), or -1 with errno. */
ssize_t session_writev(struct session_out *s, const struct iovec *iov, int cnt,
                       int timeout_ms, atomic_bool *stop);
/* A new connection of a resumable session, once its greeting (and, with a
 * key, the handshake) is done: ask for the session of token, and read
 * where the receiver stopped (*at: the stream's bytes it holds), within
 * limit seconds.  A refusal ('S') sets *refused. */
int session_rejoin(struct session_out *s, const unsigned char token[CODEC_TOKEN_SIZE],
                   double limit, atomic_bool *stop, uint64_t *at, bool *refused,
                   struct weir_error *err);
/* A connection more of a spread session: ask to join the session of token
 * as connection index of count ('J'), once the greeting (and, with a key,
 * the handshake) is done, or without a key right after the greeting,
 * before the receiver's is read; then read the receiver's 'J' back, each
 * within limit seconds.  A refusal ('S') sets *refused. */
int session_join_ask(struct session_out *s, const unsigned char token[CODEC_TOKEN_SIZE],
                     unsigned index, unsigned count, double limit, atomic_bool *stop,
                     struct weir_error *err);
int session_join_answer(struct session_out *s, const unsigned char token[CODEC_TOKEN_SIZE],
                        unsigned index, unsigned count, double limit, atomic_bool *stop,
                        bool *refused, struct weir_error *err);
/* The features this sender's greeting offers. */
uint32_t session_features(const struct session_out *s);
/* Send up to n bytes of raw data as one stored block; the bytes sent (at
 * most block_max), or -1 with errno. */
ssize_t session_frame(struct session_out *s, const unsigned char *src, size_t n,
                      int timeout_ms, atomic_bool *stop);
/* Whether the receiver takes holes (session_begin wrote version 2). */
bool session_holes(const struct session_out *s);
/* Send a hole of len bytes as one record (version 2 only): numbered and
 * chained here when framed, else numbered seq (-z: the buffer's number for
 * it).  0, or -1 with errno (what is left of it stays for session_abort). */
int session_hole(struct session_out *s, uint64_t seq, uint64_t len, int timeout_ms,
                 atomic_bool *stop);
/* The trailer of the framed blocks. */
int session_trailer(struct session_out *s, int timeout_ms, atomic_bool *stop);
/* The stream did not end as it should: tell the receiver why.  At a record
 * boundary (after finishing a frame whose write was interrupted, and rest:
 * what is left of a -z block in the buffer) it sends an 'A' record and
 * half-closes, within ABORT_SECS; the receiver then reports the sender's
 * reason.  Returns false when that could not be done: the caller resets
 * the connection instead, which the receiver reports as a reset. */
#define SESSION_ABORT_SECS 2.0
bool session_abort(struct session_out *s, int code, const char *msg, const void *rest,
                   size_t restlen);
/* Bytes the receiver must confirm: the framed data, or (compressed) the
 * engine's count. */
uint64_t session_framed_bytes(const struct session_out *s);
/* The trailer's chain of the framed blocks. */
uint64_t session_framed_chain(const struct session_out *s);

/* Read one record from the receiver.  0 and *r; -1 with *err or errno
 * ECANCELED; *got is how many bytes arrived, *eof whether it closed. */
int session_read_record(struct transport *t, int timeout_ms, atomic_bool *stop,
                        struct codec_record *r, unsigned char *raw, size_t *got, bool *eof,
                        struct weir_error *err);

/* The connecting end's half of the TLS handshake (tls.h) on t, within
 * limit seconds; then t carries sealed records (a sender's).  With label,
 * secretlen bytes are also exported under it into secret (a link test's:
 * linktest.h).  STEP_OK, STEP_FAIL with *err, or STEP_STOP once *stop is
 * set. */
struct tls_context;
int session_handshake(struct transport *t, struct tls_context *ctx, double limit,
                      uint64_t epoch_records, atomic_bool *stop, const char *label,
                      unsigned char *secret, size_t secretlen, struct weir_error *err);

/* ---- the receiving side ---- */

/* What a receiver is doing, in its keepalives. */
enum session_phase {
    SESSION_RECEIVING = 0,
    SESSION_DRAINING = 1,     /* the input ended; outputs are being written */
    SESSION_CONSUMER = 2,     /* waiting for its consumer to exit */
};

struct session_in {
    struct transport *t;
    unsigned char out[CODEC_RECORD_MAX];
    size_t len;               /* bytes of out not yet sent */
    double next_keepalive;
    bool answer_read;         /* the sender said it read the answer ('D') */
};

void session_in_init(struct session_in *s, struct transport *t);
/* A resumable session: the token that names it, once ('N'); then, as the
 * stream arrives, how much of it this end holds ('C'), without blocking
 * (a confirmation that cannot go now is left for a later one, which says
 * more: false).  session_name: 0, or -1 with errno. */
int session_name(struct session_in *s, const unsigned char token[CODEC_TOKEN_SIZE],
                 uint32_t route);
bool session_confirm(struct session_in *s, uint64_t held);
/* Say this end is alive, what its outputs wrote and what it is doing,
 * without blocking: at most every CODEC_KEEPALIVE_SECS. */
void session_keepalive(struct session_in *s, uint64_t written, enum session_phase phase,
                       double now);
/* What a receiver waits for after its answer, when its sender will say it
 * read it (CODEC_FEATURE_ANSWER_READ): that 'D', until the deadline, the
 * connection's end, or a connection knocking on knock_fd (a listening
 * socket: the sender coming back; -1: none). */
struct answer_wait {
    int knock_fd;
    double until;              /* clock_now() time */
};
/* The final answer (chain: the received stream's, vouched for by its
 * trailer), then a drain of what the sender still sends, so that closing
 * does not reset the connection under the answer: DRAIN_SECS at most, or
 * with w, what w says; a 'D' for this very answer sets answer_read.  halt
 * ends the drain (a signal). */
int session_answer(struct session_in *s, int code, uint64_t bytes, uint64_t chain,
                   const char *msg, const struct answer_wait *w, atomic_bool *halt);

#endif
