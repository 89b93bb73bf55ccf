/*
 * joins.h - the connections that join a spread transfer while it runs
 * (CODEC_FEATURE_GROW), on the receiver's side: a thread on the listening
 * socket beside the reader, inside link/ (receiver.c starts it; the engine
 * stops it through receiver_stop_joins, receiver.h).
 *
 * Contract: receiver_start_joins() is called once the input is the
 * transfer's stripe (its first connection alone); from then on, until
 * receiver_stop_joins(), the thread owns the listening socket: a
 * connection proven to belong to the session ('J' with its token and,
 * with a key, under the key it began under) is added to the stripe
 * (stripe_add) and counted; anyone else is refused as the admission
 * refuses, the sender coming back to resume (a session that may resume)
 * is kept for receiver_readmit() (receiver.h: returned), which then takes
 * it in place of waiting on the socket.  Stopping waits at most
 * LISTENER_LATE_TICK_MS plus a handshake under way.
 */
#ifndef WEIR_JOINS_H
#define WEIR_JOINS_H

#include "link/receiver.h"

/* 0, or -1 with *e (no thread). */
int receiver_start_joins(struct receiver *r, struct weir_error *e);
/* What the listener admits while connections join the session
 * (a gathering in receiver.c, and this thread): 'J' with its token, under
 * its key; its sender's 'R' when it may resume; no plain bytes, no link
 * test.  The caller sets accept_timeout. */
void receiver_join_config(struct receiver *r, struct listener_config *cfg);

#endif
