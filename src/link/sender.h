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
 * seconds: the session's name ('N': b->token, b->route, b->resumable), or
 * why it refused the stream ('S'). */
int sender_hear_name(struct backchannel *b, double limit, struct weir_error *e);

/* One attempt to take the session up again on the new connection that
 * s->t carries: the receiver's greeting, ours (with a key, the
 * handshake), the request to resume; *at is where the receiver stopped.
 * *refused: the receiver said no, and will not say yes later. */
int sender_rejoin(struct session_out *s, struct backchannel *b, const struct sender_terms *k,
                  double limit, uint64_t *at, bool *refused, struct weir_error *e);

#endif
