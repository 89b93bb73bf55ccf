/*
 * admission.c - the input's connection to a weir sender: the listener's
 * settings, admitting the sender, taking a resumed sender back, dialling
 * it again (a pull through ssh), and letting a broken connection go.
 * Everything about a receiver's reconnect, in one place.  See
 * reader_int.h.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/sync.h"
#include "format/codec.h"
#include "format/decode.h"
#include "format/sparse.h"
#include "link/listener.h"
#include "link/receiver.h"
#include "linktest/linktest.h"

#include "engine/reader_int.h"

/* The listener's settings for this engine; resume_token: waiting for the
 * sender of the session under way to come back, for window seconds. */
static void listener_settings(struct pipeline *p, struct listener_config *cfg,
                              const unsigned char *resume_token, double window)
{
    const struct tcp_settings *s = &p->cfg->tcp;
    *cfg = (struct listener_config){.raw = s->raw, .plain_too = p->cfg->listen_plain_too,
                                    .accept_timeout = resume_token ? window : s->accept_timeout,
                                    .io_timeout = s->io_timeout,
                                    .handshake_timeout = LISTENER_HANDSHAKE_SECS,
                                    .tls = p->tls_server,
                                    .epoch_records = p->cfg->epoch_records,
                                    .channel_fd = resume_token ? -1 : p->channel_fd,
                                    .channel_trusted = p->cfg->channel_trusted,
                                    .channel_name = p->cfg->channel_name,
                                    .allow_link_test = p->cfg->allow_link_test,
                                    .tests = linktest_server_service(),
                                    .resume = p->cfg->reconnect > 0,
                                    .resume_token = resume_token,
                                    .resume_identity = resume_token && p->tls_server
                                                           ? p->identity : NULL,
                                    .redials = p->cfg->input_redial != NULL};
    if (s->io_timeout > 0 && s->io_timeout < cfg->handshake_timeout)
        cfg->handshake_timeout = s->io_timeout;
}

/* A new connection became the input (t): from its admission on, its
 * bytes count for snapshots, and the main thread's records go to it.  A
 * sender taken back (resumed) is told first, under the same lock, how much
 * of the stream this end holds: it reads that before anything else, so no
 * keepalive of the main thread's may go ahead of it. */
static void take_connection(struct pipeline *p, struct transport *t, bool resumed)
{
    atomic_store(&p->net_in, t->wire_before);
    t->wire_rx = &p->net_in;
    sync_lock(&p->lock);
    p->in = *t;   /* the main thread reads in.fd only once answer_sender is set */
    session_in_init(&p->back, &p->in);
    uint64_t held = atomic_load(&p->held);
    if (resumed && session_confirm(&p->back, held))   /* a new socket has room */
        p->confirmed = held;
    sync_unlock(&p->lock);
}

/* Admit the first sender that proves itself (listener.c).  One that may
 * resume is told the session's token: a random 128-bit name that only it
 * (and, without a key, whoever reads the connection) learns. */
int admit_sender(struct pipeline *p, struct weir_error *e)
{
    struct listener_config cfg;
    listener_settings(p, &cfg, NULL, 0);
    struct transport t;
    struct listener_peer peer;
    p->channel_fd = -1;   /* the admission's now: it closes it, or it becomes the input */
    struct listener_admitted *given = p->cfg->admitted;
    if (given) {   /* a service admitted it (serve.h): it is ours from here on */
        t = given->t;
        peer = given->peer;
        memcpy(p->ahead, given->ahead, given->nahead);
        p->nahead = given->nahead;
        transport_none(&given->t);
    } else if (listener_admit(&p->listener, &cfg, &p->stop, p->log, &t, p->ahead, &p->nahead,
                              &peer, e)) {
        return errno == ECANCELED && atomic_load(&p->stop) ? STEP_STOP : STEP_FAIL;
    }
    p->in_plain = peer.plain;
    /* only a session that may resume can give an answer lost on the way
     * again, so only there does the sender's word count (writer.c, says_read) */
    p->answer_word = (peer.features & CODEC_FEATURE_ANSWER_READ) && peer.listening;
    snprintf(p->identity, sizeof p->identity, "%s", peer.identity);
    take_connection(p, &t, false);
    if (!peer.listening)
        return STEP_OK;
    if (RAND_bytes(p->token, sizeof p->token) != 1)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: no random bytes for the session's name",
                         p->in.name), STEP_FAIL;
    /* a service's sender reads its route in 'N' and gives it when it comes
     * back, so that the service hands it to this process */
    if (session_name(&p->back, p->token, peer.placed ? p->cfg->route : 0) != 0)
        return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: write", p->in.name), STEP_FAIL;
    p->confirm_every = (peer.features & CODEC_FEATURE_REREAD) ? CODEC_CONFIRM_REREAD_BYTES
                                                               : CODEC_CONFIRM_BYTES;
    sync_lock(&p->lock);
    p->resumable = true;
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* A broken input connection goes (reset, so that its sender knows); the
 * main thread's records wait for the next one.  since: the gap's start, or
 * 0 when no gap is counted. */
static void let_go_input(struct pipeline *p, double since)
{
    sync_lock(&p->lock);
    struct transport old = p->in;
    transport_none(&p->in);
    session_in_init(&p->back, &p->in);
    if (since > 0)
        p->gap_since = since;
    sync_unlock(&p->lock);
    struct weir_error ignored;
    old.ops->abort(&old);
    transport_close(&old, false, NULL, &ignored);
}

/* Let the broken connection go and take the session's sender back: on
 * the listening socket (refusing any other, listener.c) for up to window
 * seconds, or by dialling it again.  stop ends the wait early; the dialling
 * follows the engine's own.  0 with the new connection as the input and
 * the sender told how much of the stream this end holds (where it resumes),
 * or -1 with errno and e. */
int readmit(struct pipeline *p, double since, double window, atomic_bool *stop,
                   struct weir_error *e)
{
    let_go_input(p, since);
    struct listener_config cfg;
    listener_settings(p, &cfg, p->token, window);
    struct transport t;
    struct listener_peer peer;
    p->nahead = p->ahead_pos = 0;
    double start = since > 0 ? since : clock_now();
    /* a receiver that dialled its connection dials again (a pull through ssh) */
    const struct receiver_dial d = {.dial = p->cfg->input_redial,
                                    .ctx = p->cfg->input_redial_ctx,
                                    .listener = &p->listener, .cfg = &cfg, .log = p->log};
    int rc = d.dial ? receiver_redial(&d, start + window, stop, &t, p->ahead, &p->nahead, &peer,
                                      e)
                    : listener_admit(&p->listener, &cfg, stop, p->log, &t, p->ahead, &p->nahead,
                                     &peer, e);
    if (rc == 0)
        take_connection(p, &t, true);
    return rc;
}

/* The connection of a session that may resume broke (cause): close it,
 * keep everything else as it is, and wait up to --reconnect for its sender
 * on the listening socket, refusing any other (listener.c).  Once it is
 * back, tell it how much of the stream this end holds: it sends the rest
 * from there.  0, or -1 (r->gone says why, or the engine is stopping). */
int resume_input(struct reader *r, const char *cause)
{
    struct pipeline *p = r->p;
    double window = p->cfg->reconnect, since = clock_now();
    char name[sizeof p->in.name];
    snprintf(name, sizeof name, "%s", p->in.name);
    log_msg(p->log, LOG_WARN, "%s: the connection broke (%s); waiting up to %g s for the "
            "sender to come back", name, cause, window);
    struct weir_error e;
    int rc = readmit(p, since, window, &p->stop, &e);
    sync_lock(&p->lock);
    p->gap_secs += clock_now() - since;
    p->gap_since = 0;
    sync_unlock(&p->lock);
    if (rc != 0) {
        if (errno == ECANCELED && atomic_load(&p->stop))
            return -1;
        if (errno == ECONNREFUSED)
            error_set(&r->gone, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                      "sender refuses a new one: it is gone (%s)", name, cause, e.msg);
        else if (errno == ETIMEDOUT)
            error_set(&r->gone, WEIR_EXIT_NETWORK, "%s: the sender did not come back within "
                      "%g s (the connection broke: %s)", name, window, cause);
        else
            error_set(&r->gone, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and "
                      "waiting for the sender to come back failed: %s", name, cause, e.msg);
        errno = EPIPE;
        return -1;
    }
    uint64_t held = atomic_load(&p->held);
    sync_lock(&p->lock);
    p->reconnections++;
    sync_unlock(&p->lock);
    log_msg(p->log, LOG_WARN, "%s: the sender is back after %.1f s; resuming at byte %llu of "
            "the stream", p->in.name, clock_now() - since, (unsigned long long)held);
    return 0;
}
