/*
 * backchannel.h - a weir sender's ear: what its receiver says on the way
 * back (keepalives, confirmations, the answer), heard by a thread of its
 * own, and the end of a sending session: waiting for the answer, checking
 * it, and saying that it was read.
 *
 * Contract: the layer above owns a struct backchannel per connection to a
 * weir receiver and registers, once, the lock that guards the fields
 * marked "lock", the condition variable that the back channel broadcasts
 * whenever the answer arrives or its thread ends, and three callbacks:
 * what the receiver confirmed and a keepalive before the session was named
 * (both called with the lock held), and the back channel's own failure
 * (called without it), besides the first thing its thread does (the
 * owner's signal mask).  The back channel never takes the owner's other
 * state, and never calls up except through these.  The writer of the
 * output alone starts, stops and joins the thread; the thread reads the
 * transport, and nothing else reads it while the thread runs.  When the
 * transfer is spread over several connections (stripe.h), the transport
 * is all of them: the thread reads the first, where every record of the
 * receiver's comes, and the 'D' that says the answer was read goes there
 * too, after every chunk (stripe_last_record).  Failures
 * are weir_errors naming the transport; every function that ends a step
 * returns STEP_OK, STEP_FAIL with *e, or STEP_STOP.
 */
#ifndef WEIR_BACKCHANNEL_H
#define WEIR_BACKCHANNEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "format/codec.h"
#include "link/session.h"
#include "transport/transport.h"
#include "weir/error.h"

struct backchannel_owner {
    pthread_mutex_t *lock;
    pthread_cond_t *cv;
    void *ctx;
    void (*on_thread)(void);   /* first thing on the new thread (its signal mask) */
    /* the receiver holds the stream's first `held` bytes ('C') */
    void (*on_confirmed)(void *ctx, uint64_t held);
    /* it sent a keepalive before it named the session: it cannot resume */
    void (*on_unnamed)(void *ctx);
    /* the back channel failed (the receiver's failure, or the connection's
     * outside a session that may resume): the output fails */
    void (*on_failure)(void *ctx, const struct weir_error *e);
};

struct backchannel {
    struct backchannel_owner own;   /* set once, before the first start */
    struct transport *t;            /* the connection the thread reads */
    atomic_bool *halt;              /* the output must stop */
    double silence;                 /* a receiver that may resume sends keepalives
                                       every CODEC_KEEPALIVE_SECS; its silence for
                                       this long is a break (session_silence) */
    bool several;                   /* one of several receivers: failures name it */
    pthread_t thread;               /* lock: valid while running */
    bool joinable;                  /* the writer's: a thread to join */
    /* lock: */
    bool running;
    bool resumable;            /* the receiver named the session ('N'), so it may resume
                                  and keeps talking */
    unsigned char token[CODEC_TOKEN_SIZE];   /* the session's name (sender.h) */
    uint32_t route;            /* a service's route to the session */
    bool ended;                /* the whole stream was sent: an answer may say success */
    bool broken;               /* the connection broke under the session */
    char broken_why[160];      /* how */
    double last_heard;         /* when the receiver last said anything */
    uint64_t peer_written;     /* what its keepalives say its outputs wrote */
    unsigned peer_phase;       /* and what it is doing (enum session_phase) */
    bool answered;             /* the receiver answered */
    int code;                  /* its answer */
    uint64_t bytes, chain;     /* what it says it received, and their chain */
    char msg[CODEC_STATUS_MAX + 1];
};

/* Whether a failed socket operation (err) broke the connection, which a
 * session that may resume survives. */
bool backchannel_breaks(int err);

/* Note a break (lock held): the first cause stays. */
void backchannel_broke_locked(struct backchannel *b, const char *why);

/* Start the thread on b->t (the lock is taken here). */
int backchannel_start(struct backchannel *b, struct weir_error *e);

/* Let go of a connection given up on: wake the thread without sending
 * anything, and join it. */
void backchannel_stop(struct backchannel *b);

/* The output closes.  told: the receiver was sent an abort record, and
 * gets SESSION_ABORT_SECS to read it and hang up before the thread is
 * woken; a receiver that answered is drained, so that the connection
 * closes in order (a reset would take back its answer's delivery). */
void backchannel_finish(struct backchannel *b, bool told);

/* Whether the receiver waits for this sender's word that it read the
 * answer: both offer CODEC_FEATURE_ANSWER_READ, and the session may resume,
 * since only then can a receiver give an answer lost on the way again.
 * Lock held, or the writer's thread (the session is named long before). */
bool backchannel_says_read(const struct backchannel *b, const struct session_out *s);

/* After the stream's end (its trailer is out): wait for the answer while
 * the receiver is heard at least every `limit` seconds (0: for ever), the
 * output is alive (*dead false, lock) and the thread runs; *awaiting
 * (lock) is true meanwhile.  Then tell a receiver that waits for it that
 * the answer was read (timeout_ms for that write).  STEP_OK: the receiver
 * answered success (check it with backchannel_check); STEP_FAIL with *e:
 * it answered a failure, fell silent, or the connection broke; STEP_STOP:
 * stopping, or the thread reported the failure. */
int backchannel_await(struct backchannel *b, struct session_out *s, double limit,
                      const bool *dead, bool *awaiting, int timeout_ms, struct weir_error *e);

/* A success answer holds only for this stream: the bytes sent and their
 * chain, as this end counted them. */
int backchannel_check(const struct backchannel *b, uint64_t sent, uint64_t chain,
                      struct weir_error *e);

/* The receiver refused or failed the stream (code, msg): in its own words,
 * "receiver: ...", or with several, "receiver HOST:PORT: ...".  STEP_FAIL. */
int backchannel_refused(const struct backchannel *b, int code, const char *msg,
                        struct weir_error *e);

#endif
