/*
 * receiver.h - a weir receiver's side of a session, beyond admitting its
 * sender (listener.h): dialling the sender again after a break (a pull
 * through ssh, where the receiver made the connection) and admitting what
 * it reaches as the listener would, and whether an answer reached an
 * older sender (one that does not say it read it).
 *
 * Contract: called by the engine's reader or main thread, one at a time,
 * with the listener and the input's transport the engine owns.  A dial is
 * the callback the layer above registered (weir_config.input_redial).
 * Failures are -1 with errno and a weir_error; stop ends every wait.
 */
#ifndef WEIR_RECEIVER_H
#define WEIR_RECEIVER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "link/listener.h"
#include "transport/transport.h"
#include "weir/error.h"
#include "weir/log.h"

#define RECEIVER_ACK_MS 5000   /* for the sender's host to acknowledge the answer */

/* Dialling the sender again, and the admission of what it reaches. */
struct receiver_dial {
    int (*dial)(void *ctx, double timeout, atomic_bool *stop, int *fd, struct weir_error *why);
    void *ctx;
    struct tcp_listener *listener;
    struct listener_config *cfg;   /* its channel_fd and accept_timeout are set here */
    struct weir_log *log;
};

/* Dial until deadline, with a growing pause, and admit what answers as
 * the listener would (the sender proves itself with the session's token):
 * 0 with t, ahead and peer as listener_admit gives them; -1 with errno
 * ECONNREFUSED (the sender is gone), ECANCELED (stopping) or ETIMEDOUT,
 * and *e. */
int receiver_redial(const struct receiver_dial *d, double deadline, atomic_bool *stop,
                    struct transport *t, unsigned char *ahead, size_t *nahead,
                    struct listener_peer *peer, struct weir_error *e);

/* Whether the answer just written on `in` reached an older sender: every
 * byte written on the connection, the answer last, acknowledged by the
 * sender's TCP within RECEIVER_ACK_MS (its end of file proves nothing: it
 * half-closed after its trailer, long before the answer).  A connection
 * that is not a socket (a relay) counts once its other end closes.  halt
 * ends the wait. */
bool receiver_answer_acked(struct transport *in, atomic_bool *halt);

#endif
