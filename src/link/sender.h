/*
 * sender.h - a weir sender meets its receiver: the terms both ends must
 * agree on (a key, zstd, a service's target), the keyed greeting and the
 * handshake, the session's name, and taking a session up again on a new
 * connection after a break.
 *
 * Contract: called by the writer of one output, on its thread, with the
 * output's session (session.h) and back channel (backchannel.h), before
 * the back channel's thread starts on the connection (it reads nothing
 * meanwhile).  The session's name (its token and route) is kept in the
 * back channel, under its owner's lock.  Every function returns STEP_OK,
 * STEP_FAIL with *e naming the transport, or STEP_STOP once the output
 * must stop (*b->halt).
 */
#ifndef WEIR_SENDER_H
#define WEIR_SENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "crypto/tls.h"
#include "link/backchannel.h"
#include "link/session.h"
#include "weir/error.h"

/* What this sender asks of every receiver, fixed for the transfer. */
struct sender_terms {
    bool keyed;                /* it sends only sealed records */
    struct tls_context *tls;   /* and shakes hands with this (keyed) */
    uint64_t epoch_records;    /* records under one key before the next */
    bool zstd;                 /* --zstd: the receiver must read zstd streams */
    const char *target;        /* --target: the receiver must be a service */
};

/* The receiver greeted: whether the two ends agree on the terms (a sender
 * with a key never sends in clear, and one without cannot talk to a
 * receiver that has one). */
int sender_agree(const struct session_out *s, const struct sender_terms *k,
                 struct weir_error *e);

/* Agree, then with a key greet and complete the handshake within limit
 * seconds (timeout_ms for the greeting's write). */
int sender_meet(struct session_out *s, const struct backchannel *b,
                const struct sender_terms *k, double limit, int timeout_ms,
                struct weir_error *e);

/* The receiver's first record after the stream header, within limit
 * seconds: the session's name ('N': b->token, b->route; b->resumable when
 * resumable: both ends offered resuming), or why it refused the stream
 * ('S').  A session is named to be resumed, or joined (--streams). */
int sender_hear_name(struct backchannel *b, double limit, bool resumable, struct weir_error *e);

/* A connection more for a spread session (s->spread): over the new
 * connection that s->t carries, the receiver's greeting (it must offer
 * CODEC_FEATURE_STREAMS and the same terms), ours (with a key, the
 * handshake), and the join ('J') of connection index of count, within
 * limit seconds each.  Without a key, ours and the join go out before the
 * receiver's greeting is read (a round trip less; doc/security.md §11). */
int sender_join(struct session_out *s, const struct backchannel *b,
                const struct sender_terms *k, unsigned index, unsigned count, double limit,
                struct weir_error *e);

/* One attempt to take the session up again on the new connection that
 * s->t carries: the receiver's greeting, ours (with a key, the
 * handshake), the request to resume; *at is where the receiver stopped.
 * *refused: the receiver said no, and will not say yes later. */
int sender_rejoin(struct session_out *s, struct backchannel *b, const struct sender_terms *k,
                  double limit, uint64_t *at, bool *refused, struct weir_error *e);

/* A --raw sender cannot know that its data arrived, but it can know that
 * it did not: a weir listener (which greets, then refuses plain bytes) or
 * a reset.  It reads t until the peer closes, for RAW_CONFIRM_SECS at
 * most; nc -l, socat and mbuffer close once they have read everything.
 * fallback: the plain bytes went after no greeting came (--plain-after). */
#define RAW_CONFIRM_SECS 5.0
int sender_raw_confirm(struct transport *t, atomic_bool *halt, bool fallback,
                       struct weir_error *e);

/* ---- mending a break ---- */

#define SENDER_BACKOFF_MAX 1.0   /* the longest pause between two attempts */

/* What the owner does for sender_mend: dial where the receiver was
 * (within limit seconds: 0 with *fd; -1 with errno ECANCELED when
 * stopping, ECONNREFUSED when nothing listens there, and *why when it
 * knows more), make a new connection s->t (adopt), and drop the
 * connection of a failed attempt (drop). */
struct sender_redial {
    void *ctx;
    int (*dial)(void *ctx, double limit, int *fd, struct weir_error *why);
    void (*adopt)(void *ctx, int fd);
    void (*drop)(void *ctx);
};

/* One break of the connection.  The owner sets name, reconnect, cause,
 * confirmed and since before sender_mend. */
struct sender_break {
    const char *name;           /* the output, as messages name it */
    double reconnect;           /* --reconnect: how long the break may last */
    char cause[200];            /* how it broke */
    uint64_t confirmed;         /* what the receiver had confirmed then */
    double since;               /* when */
    char last[WEIR_ERROR_MAX];  /* why the last attempt failed */
};

/* Attempts, with a growing pause between them, until one takes the
 * session up again (STEP_OK, *at: where the receiver stopped), the break
 * outlasts br->reconnect, the receiver is gone (nothing listens where it
 * was) or refuses to resume (STEP_FAIL, *e says which and what it had
 * confirmed), or the output must stop (STEP_STOP). */
int sender_mend(struct session_out *s, struct backchannel *b, const struct sender_terms *k,
                const struct sender_redial *r, struct sender_break *br, uint64_t *at,
                struct weir_error *e);

#endif
