/*
 * receiver.c - a weir receiver's side of a session while the stream
 * arrives: admitting its sender and naming the session, confirmations,
 * refusing others, taking the sender back after a break (on the listening
 * socket, or dialling it again), and whether an older sender's TCP
 * acknowledged the answer.  The answer's way home is answer.c.  See
 * receiver.h.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>

#include "base/sync.h"
#include "link/joins.h"
#include "link/receiver.h"
#include "link/stripe.h"
#include "os/os.h"

/* Dialling the sender again, and the admission of what it reaches. */
struct receiver_dial {
    receiver_dial_fn dial;
    void *ctx;
    struct tcp_listener *listener;
    struct listener_config *cfg;   /* its channel_fd and accept_timeout are set here */
    struct weir_log *log;
};

void receiver_init(struct receiver *r)
{
    memset(r, 0, sizeof *r);
    r->listener.fd = -1;
    r->confirm_every = CODEC_CONFIRM_BYTES;
}

void receiver_register(struct receiver *r, const struct receiver_owner *own)
{
    r->own = *own;
}

/* Sleep up to secs in short steps, or until stop. */
static void pause_unless(double secs, atomic_bool *stop)
{
    for (double until = clock_now() + secs; clock_now() < until && !atomic_load(stop);) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* One dial and admission within limit seconds: 0, or -1 with errno and
 * *why; *final: the next attempt cannot do better. */
static int redial_once(const struct receiver_dial *d, double limit, atomic_bool *stop,
                       struct transport *t, unsigned char *ahead, size_t *nahead,
                       struct listener_peer *peer, bool *final, struct weir_error *why)
{
    int fd;
    why->msg[0] = '\0';
    *final = false;
    if (d->dial(d->ctx, limit, stop, &fd, why) != 0) {
        *final = errno == ECANCELED || errno == ECONNREFUSED;
        return -1;
    }
    d->cfg->channel_fd = fd;   /* the admission's: it closes it, or it becomes the input */
    d->cfg->accept_timeout = limit;
    if (listener_admit(d->listener, d->cfg, stop, d->log, t, ahead, nahead, peer, why) == 0)
        return 0;
    *final = errno == ECANCELED && atomic_load(stop);
    return -1;
}

/* Dial until deadline, with a growing pause, and admit what answers as
 * the listener would (the sender proves itself with the session's token):
 * 0 with t, ahead and peer as listener_admit gives them; -1 with errno
 * ECONNREFUSED (the sender is gone), ECANCELED (stopping) or ETIMEDOUT,
 * and *e. */
static int dial_again(const struct receiver_dial *d, double deadline, atomic_bool *stop,
                  struct transport *t, unsigned char *ahead, size_t *nahead,
                  struct listener_peer *peer, struct weir_error *e)
{
    double backoff = 0.05;
    char last[WEIR_ERROR_MAX] = "";
    for (;;) {
        double left = deadline - clock_now();
        if (atomic_load(stop)) {
            error_set(e, WEIR_EXIT_NETWORK, "stopped while dialling the sender again");
            errno = ECANCELED;
            return -1;
        }
        if (left <= 0) {
            error_set(e, WEIR_EXIT_NETWORK, "%s", last[0] ? last : "no connection");
            errno = ETIMEDOUT;
            return -1;
        }
        struct weir_error why;
        bool final;
        double limit = left < LISTENER_HANDSHAKE_SECS ? left : LISTENER_HANDSHAKE_SECS;
        if (redial_once(d, limit, stop, t, ahead, nahead, peer, &final, &why) == 0)
            return 0;
        if (final) {
            *e = why;
            return -1;
        }
        snprintf(last, sizeof last, "%s", why.msg);
        double room = deadline - clock_now();
        pause_unless(backoff < room ? backoff : room, stop);
        backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
    }
}

/* A new connection became the input (t): from its admission on, its
 * bytes count for snapshots, and the main thread's records go to it.  A
 * sender taken back (resumed) is told first, under the same lock, how much
 * of the stream this end holds: it reads that before anything else, so no
 * keepalive of the main thread's may go ahead of it. */
static void take_connection(struct receiver *r, struct transport *t, bool resumed)
{
    atomic_store(r->own.wire_rx, t->wire_before);
    t->wire_rx = r->own.wire_rx;
    sync_lock(r->own.lock);
    *r->own.in = *t;   /* the main thread reads in's fd only once the stream is a weir's */
    session_in_init(&r->back, r->own.in);
    uint64_t held = atomic_load(r->own.held);
    if (resumed && session_confirm(&r->back, held))   /* a new socket has room */
        r->confirmed = held;
    sync_unlock(r->own.lock);
}

static void drop_input(struct receiver *r, double since);

/* A connection admitted elsewhere (a service, a gathering, the joins
 * thread) becomes this receiver's: its transport and what its admission
 * learnt (*t, *peer), and what was read ahead of the stream. */
static void take_admitted(struct receiver *r, struct listener_admitted *a, struct transport *t,
                          struct listener_peer *peer)
{
    *t = a->t;
    *peer = a->peer;
    memcpy(r->ahead, a->ahead, a->nahead);
    r->nahead = a->nahead;
    r->ahead_pos = 0;
    transport_none(&a->t);
}

/* The gathered connections (conns[0 .. count-1], the first the input)
 * become the input: the stream in order, and the records to the sender on
 * the first (link/stripe.h).  The listening socket then closes unless the
 * session may resume, or grows (more connections join while it runs:
 * joins.h). */
static int start_gathered(struct receiver *r, struct transport *conns, unsigned count,
                          bool grows, struct weir_error *e)
{
    for (unsigned i = 1; i < count; i++) {
        atomic_fetch_add(r->own.wire_rx, conns[i].wire_before);
        conns[i].wire_rx = r->own.wire_rx;
    }
    sync_lock(r->own.lock);
    conns[0] = *r->own.in;
    int rc = stripe_in(r->own.in, conns, (int)count, r->own.stripe_window, r->own.stop, e);
    if (rc != 0)
        transport_none(r->own.in);   /* closed with the others */
    session_in_init(&r->back, stripe_first(r->own.in));
    if (rc == 0)
        *r->own.streams = count;
    bool resumable = r->resumable;
    sync_unlock(r->own.lock);
    if (rc != 0)
        return STEP_FAIL;
    r->grows = grows;
    if (grows) {
        log_msg(r->own.log, LOG_INFO, "%s: the transfer comes over one connection at first, "
                "and more join it while it runs", r->own.in->name);
        return receiver_start_joins(r, e) ? STEP_FAIL : STEP_OK;
    }
    /* a service's process keeps its handed-over socket, to refuse at once
     * what the service still hands it by the session's route */
    if (!resumable && !r->listener.handoff)
        tcp_listener_close(&r->listener);
    log_msg(r->own.log, LOG_INFO, "%s: the transfer comes over %u connections",
            r->own.in->name, count);
    return STEP_OK;
}

/* A spread transfer that grows begins with its first connection alone. */
static int start_growing(struct receiver *r, struct weir_error *e)
{
    struct transport one[1];
    return start_gathered(r, one, 1, true, e);
}

/* The sender gave up on the connections while they gathered and came
 * back to resume (back): the input becomes its new connection, told what
 * this end holds, as after any break. */
static void take_back(struct receiver *r, struct listener_admitted *back)
{
    drop_input(r, 0);
    struct transport t;
    struct listener_peer peer;
    take_admitted(r, back, &t, &peer);
    take_connection(r, &t, true);
    log_msg(r->own.log, LOG_WARN, "%s: the sender came back before its other connections had "
            "all joined; they join again", r->own.in->name);
}

/* The other connections of a spread transfer join it on the listening
 * socket (listener_gather).  A session that may resume takes its sender
 * back there too, should it give up on them before all are in (one was
 * cut while it joined), and gathers again. */
static int gather(struct receiver *r, atomic_bool *stop, struct weir_error *e)
{
    struct listener_config cfg;
    receiver_join_config(r, &cfg);
    /* joins take the handshake time at most; a sender that gives up on
     * one comes back by then, so a session that may resume waits for it
     * twice as long */
    cfg.accept_timeout = cfg.handshake_timeout * (cfg.resume_token ? 2 : 1);
    for (;;) {
        struct transport conns[CODEC_STREAMS_MAX];
        for (int i = 0; i < CODEC_STREAMS_MAX; i++)
            transport_none(&conns[i]);
        unsigned count = 0;
        struct listener_admitted back;
        int rc = listener_gather(&r->listener, &cfg, stop, r->own.log, conns, &count, &back, e);
        int why = errno;
        if (rc != 0)
            for (int i = 1; i < CODEC_STREAMS_MAX; i++)
                transport_close(&conns[i], false, NULL, &(struct weir_error){0});
        if (rc == 0)
            return start_gathered(r, conns, count, false, e);
        if (rc == 1) {
            take_back(r, &back);
            if (!back.peer.spread)
                return STEP_OK;
            if (back.peer.grow)
                return start_growing(r, e);
            continue;
        }
        if (why == ECANCELED && atomic_load(stop))
            return STEP_STOP;
        if (why == ETIMEDOUT)
            error_set(e, WEIR_EXIT_NETWORK, "%s: the sender's other connections did not all "
                      "join within %g s", r->own.in->name, cfg.accept_timeout);
        return STEP_FAIL;
    }
}

/* The sender was admitted (peer): the input is its connection, and one
 * that may resume, or that spreads the transfer, learns the session's
 * name (and the others of a spread one join it).  A service's sender reads
 * its route in 'N' and gives it when it comes back, so that the service
 * hands it to this process. */
static int name_session(struct receiver *r, struct transport *t,
                        const struct listener_peer *peer, atomic_bool *stop,
                        struct weir_error *e)
{
    r->plain = peer->plain;
    /* only a session that may resume can give an answer lost on the way
     * again, so only there does the sender's word count */
    r->answer_word = (peer->features & CODEC_FEATURE_ANSWER_READ) && peer->resuming;
    snprintf(r->identity, sizeof r->identity, "%s", peer->identity);
    take_connection(r, t, false);
    if (!peer->resuming && !peer->spread)
        return STEP_OK;
    if (RAND_bytes(r->token, sizeof r->token) != 1)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: no random bytes for the session's name",
                         r->own.in->name), STEP_FAIL;
    if (session_name(&r->back, r->token, peer->placed ? r->own.route : 0) != 0)
        return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: write", r->own.in->name), STEP_FAIL;
    r->confirm_every = (peer->features & CODEC_FEATURE_REREAD) ? CODEC_CONFIRM_REREAD_BYTES
                                                                : CODEC_CONFIRM_BYTES;
    sync_lock(r->own.lock);
    r->resumable = peer->resuming;
    sync_unlock(r->own.lock);
    return !peer->spread ? STEP_OK : peer->grow ? start_growing(r, e) : gather(r, stop, e);
}

int receiver_admit(struct receiver *r, int channel_fd, struct listener_admitted *given,
                   atomic_bool *stop, struct weir_error *e)
{
    struct listener_config cfg = r->own.cfg;
    cfg.channel_fd = channel_fd;   /* the admission's: it closes it, or it becomes the input */
    struct transport t;
    struct listener_peer peer;
    if (given) {   /* a service admitted it (serve.h): it is ours from here on */
        take_admitted(r, given, &t, &peer);
    } else if (listener_admit(&r->listener, &cfg, stop, r->own.log, &t, r->ahead, &r->nahead,
                              &peer, e)) {
        return errno == ECANCELED && atomic_load(stop) ? STEP_STOP : STEP_FAIL;
    }
    return name_session(r, &t, &peer, stop, e);
}

/* A broken input connection goes (reset, so that its sender knows); the
 * main thread's records wait for the next one. */
static void drop_input(struct receiver *r, double since)
{
    sync_lock(r->own.lock);
    struct transport old = *r->own.in;
    transport_none(r->own.in);
    session_in_init(&r->back, r->own.in);
    if (since > 0)
        *r->own.gap_since = since;
    sync_unlock(r->own.lock);
    struct weir_error ignored;
    old.ops->abort(&old);
    transport_close(&old, false, NULL, &ignored);
}

/* The sender came back while the joins thread took the socket (joins.h):
 * its connection, as listener_admit would have given it. */
static bool take_returned(struct receiver *r, struct transport *t, struct listener_peer *peer)
{
    sync_lock(r->own.lock);
    bool back = r->has_returned;
    r->has_returned = false;
    sync_unlock(r->own.lock);
    if (back)
        take_admitted(r, &r->returned, t, peer);
    return back;
}

/* The sender comes back: on the listening socket, or dialled again. */
static int come_back(struct receiver *r, struct listener_config *cfg, double deadline,
                     atomic_bool *stop, struct transport *t, struct listener_peer *peer,
                     struct weir_error *e)
{
    /* a receiver that dialled its connection dials again (a pull through ssh) */
    const struct receiver_dial d = {.dial = r->own.dial, .ctx = r->own.dial_ctx,
                                    .listener = &r->listener, .cfg = cfg, .log = r->own.log};
    if (take_returned(r, t, peer))
        return 0;
    return d.dial ? dial_again(&d, deadline, stop, t, r->ahead, &r->nahead, peer, e)
                  : listener_admit(&r->listener, cfg, stop, r->own.log, t, r->ahead,
                                   &r->nahead, peer, e);
}

int receiver_readmit(struct receiver *r, double since, double window, atomic_bool *stop,
                     struct weir_error *e)
{
    receiver_stop_joins(r);   /* the socket is the sender's way back now */
    drop_input(r, since);
    double start = since > 0 ? since : clock_now();
    struct listener_config cfg = r->own.cfg;
    cfg.channel_fd = -1;
    cfg.accept_timeout = window;
    cfg.resume_token = r->token;
    cfg.resume_identity = cfg.tls ? r->identity : NULL;
    struct transport t;
    struct listener_peer peer;
    r->nahead = r->ahead_pos = 0;
    int rc = come_back(r, &cfg, start + window, stop, &t, &peer, e);
    if (rc == 0)
        take_connection(r, &t, true);
    if (rc == 0 && peer.spread &&
        (rc = peer.grow ? start_growing(r, e) : gather(r, stop, e)) != STEP_OK) {
        /* the sender was back: what failed is its connections' gathering,
         * which *e says (not the window for its return) */
        errno = rc == STEP_STOP ? ECANCELED : EPROTO;
        return -1;
    }
    return rc;
}

bool receiver_resumable(struct receiver *r)
{
    sync_lock(r->own.lock);
    bool yes = r->resumable;
    sync_unlock(r->own.lock);
    return yes;
}

bool receiver_confirm(struct receiver *r, uint64_t held, bool force)
{
    sync_lock(r->own.lock);
    bool due = r->resumable && (force || held - r->confirmed >= r->confirm_every);
    if (due && session_confirm(&r->back, held))
        r->confirmed = held;
    /* a confirmation that was due and could not go is left for the next
     * one; only bytes not yet due are owed once the connection idles */
    bool owed = !due && r->resumable && held > r->confirmed;
    sync_unlock(r->own.lock);
    return owed;
}

void receiver_inform_locked(struct receiver *r, uint64_t written, enum session_phase phase,
                            double now)
{
    session_keepalive(&r->back, written, phase, now);
    uint64_t held = atomic_load(r->own.held);
    if (r->resumable && held > r->confirmed && session_confirm(&r->back, held))
        r->confirmed = held;   /* what the reader has not said yet */
}

bool receiver_knocked(struct receiver *r)
{
    struct pollfd knock = {.fd = r->listener.fd, .events = POLLIN};
    return r->listener.fd >= 0 && poll(&knock, 1, 0) > 0;
}

void receiver_refuse_others(struct receiver *r)
{
    /* while joins are taken, their thread refuses the others; once it
     * returned (it took the sender's 'R', or failed), this does again */
    bool joins = r->joins_running && !atomic_load(&r->joins_over);
    if ((receiver_resumable(r) || r->listener.handoff) && !joins && receiver_knocked(r))
        listener_refuse_waiting(&r->listener, r->own.cfg.raw, r->own.log);
}

size_t receiver_take_ahead(struct receiver *r, void *buf, size_t n)
{
    if (r->ahead_pos >= r->nahead)
        return 0;
    size_t take = r->nahead - r->ahead_pos < n ? r->nahead - r->ahead_pos : n;
    memcpy(buf, r->ahead + r->ahead_pos, take);
    r->ahead_pos += take;
    return take;
}

bool receiver_ahead_left(const struct receiver *r)
{
    return r->ahead_pos < r->nahead;
}

bool receiver_stream_over(struct receiver *r, bool whole)
{
    receiver_stop_joins(r);
    struct transport late;
    struct listener_peer ignored;
    if (take_returned(r, &late, &ignored))   /* a sender back too late: the stream is over */
        transport_close(&late, false, NULL, &(struct weir_error){0});
    sync_lock(r->own.lock);
    bool resumable = r->resumable;
    r->resumable = false;   /* nothing more to confirm or resume */
    /* whole: its sender may still have to come back for the answer */
    r->answer_home = resumable && whole && (r->listener.fd >= 0 || r->own.dial);
    bool home = r->answer_home;
    sync_unlock(r->own.lock);
    if (resumable && !home) {
        tcp_listener_close(&r->listener);
        OPENSSL_cleanse(r->token, sizeof r->token);
    }
    if (r->grows && !resumable && !r->listener.handoff)
        tcp_listener_close(&r->listener);   /* it stayed for the joins alone */
    return home;
}

/* A read's error that says the network broke the connection (a reset, a
 * timeout, a route or a link gone), not that the stream is bad. */
static bool network_break(int err)
{
    return err == ECONNRESET || err == ETIMEDOUT || err == ENOTCONN || err == ECONNABORTED ||
           err == EHOSTUNREACH || err == ENETUNREACH || err == ENETDOWN || err == EHOSTDOWN;
}

/* A resumable session's connection that broke once the whole stream had
 * arrived (after the trailer; the sender's half-close lost in a reset):
 * the stream ends as with EOF, and the answer still finds its sender. */
static bool whole_then_broke(struct receiver *r, bool ended, int err)
{
    return receiver_resumable(r) && ended && !atomic_load(r->own.stop) &&
           (network_break(err) || err == EPIPE);
}

/* A resumable session's connection that ended once the whole stream had
 * arrived, with a reset behind the end: Linux reports a reset that came
 * with data still queued as the end (0) once the data is read, and keeps
 * the error for SO_ERROR (or for the first send, which takes it).  Such an
 * end is a break like whole_then_broke's. */
static bool whole_then_reset(struct receiver *r, bool ended)
{
    const struct transport *in = r->own.in;
    if (!in->is_socket || in->fd < 0)
        return false;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(in->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0)
        return whole_then_broke(r, ended, err);
    /* a send on it (a confirmation, a keepalive) may have taken the error
     * already; the state still tells a reset (closed) from the sender's
     * orderly end (close-wait) */
    return os_tcp_closed(in->fd) == 1 && whole_then_broke(r, ended, ECONNRESET);
}

/* Whether a failed read (got 0: the end) broke a session that may resume:
 * a reset, a cut, a timeout, an encrypted stream cut short, before the
 * stream's trailer; not a stop, nor an abort (which the decoder reads as a
 * record), nor bytes that do not open. */
static bool broken_session(struct receiver *r, bool ended, ssize_t got, int err)
{
    if (!receiver_resumable(r) || ended || atomic_load(r->own.stop))
        return false;
    if (got == 0)
        return true;
    /* a cut inside a sealed record, or inside a spread stream's chunk, is
     * one too */
    return network_break(err) ||
           (err == EPIPE && (r->own.in->sealed || r->own.in->stripe));
}

/* Whether the joins thread took the sender back (joins.h). */
static bool sender_returned(struct receiver *r)
{
    sync_lock(r->own.lock);
    bool back = r->has_returned;
    sync_unlock(r->own.lock);
    return back;
}

/* Read the input.  While a session may resume, a connection that says
 * nothing for session_silence() while a new one waits on the listening
 * socket is taken for broken (*silent): its sender found it dead and came
 * back.  (A stranger knocking at such a time only makes a live sender
 * reconnect.)  Its reads wait a second at a time, which keeps the state of
 * a record under way. */
static ssize_t read_watching(struct receiver *r, void *buf, size_t n, int timeout_ms,
                             bool *silent)
{
    struct transport *in = r->own.in;
    bool watch = receiver_resumable(r) && r->listener.fd >= 0;
    if (!watch)
        return in->ops->read(in, buf, n, timeout_ms, r->own.stop);
    double since = clock_now();
    for (;;) {
        int slice = timeout_ms < 0 || timeout_ms > 1000 ? 1000 : timeout_ms;
        ssize_t got = in->ops->read(in, buf, n, slice, r->own.stop);
        if (got >= 0 || errno != ETIMEDOUT)
            return got;
        double quiet = clock_now() - since;
        if (sender_returned(r) ||
            (quiet >= session_silence(r->own.cfg.io_timeout) && receiver_knocked(r))) {
            *silent = true;
            errno = ETIMEDOUT;
            return -1;
        }
        if (timeout_ms >= 0 && quiet * 1000 >= timeout_ms)
            return -1;   /* --timeout: ETIMEDOUT */
    }
}

/* Why a read (got, errno) broke a session that may resume, in words. */
static void break_cause(struct receiver *r, ssize_t got, bool silent,
                        char cause[RECEIVER_CAUSE_MAX])
{
    size_t len = RECEIVER_CAUSE_MAX;
    if (silent && sender_returned(r))
        snprintf(cause, len, "the sender came back on a new connection");
    else if (silent)
        snprintf(cause, len, "it said nothing for %g s, and a new connection is waiting",
                 session_silence(r->own.cfg.io_timeout));
    else if (got == 0)
        snprintf(cause, len, "the sender's end closed it");
    else if (errno == ETIMEDOUT)
        snprintf(cause, len, "no progress for %g s", r->own.cfg.io_timeout);
    else if (*stripe_why(r->own.in))
        snprintf(cause, len, "%s", stripe_why(r->own.in));
    else if (errno == EPIPE)
        snprintf(cause, len, "the encrypted stream was cut short");
    else
        snprintf(cause, len, "%s", strerror(errno));
}

ssize_t receiver_read(struct receiver *r, void *buf, size_t n, int timeout_ms, bool ended,
                      char cause[RECEIVER_CAUSE_MAX], enum receiver_read *how)
{
    bool silent = false;
    *how = RECEIVER_READ;
    ssize_t got = read_watching(r, buf, n, timeout_ms, &silent);
    if (got > 0)
        return got;
    int err = errno;
    if (broken_session(r, ended, got, err)) {
        errno = err;
        break_cause(r, got, silent, cause);
        *how = RECEIVER_BROKE;
    } else if ((got < 0 && whole_then_broke(r, ended, err)) ||
               (got == 0 && whole_then_reset(r, ended))) {
        *how = RECEIVER_BROKE_WHOLE;
    }
    errno = err;
    return got;
}

bool receiver_answer_acked(struct transport *in, atomic_bool *halt)
{
    char b[64];
    if (!in->is_socket)
        return in->ops->read(in, b, sizeof b, RECEIVER_ACK_MS, halt) >= 0;
    long pause_ns = 500 * 1000L;   /* a loopback's acknowledgement takes microseconds */
    for (double until = clock_now() + RECEIVER_ACK_MS / 1000.0; !atomic_load(halt);) {
        int err = 0, queued = -1;
        socklen_t len = sizeof err;
        /* all but the end of this direction (the answer shut it down: its
         * FIN takes one sequence number): a sender that closed once it had
         * the answer resets that FIN instead of acknowledging it, and a
         * reset after the acknowledgement changes nothing */
        int known = os_tcp_unsent(in->fd, &queued) == 0 || errno != ENOSYS;
        if (known && queued >= 0 && queued <= 1)
            return true;
        if (getsockopt(in->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
            return false;   /* reset: what was unacknowledged is lost */
        if (!known)
            return true;   /* a system that cannot say: sent, and no reset */
        if (clock_now() >= until)
            return false;
        struct timespec ts = {0, pause_ns};
        nanosleep(&ts, NULL);
        pause_ns = pause_ns * 2 > 20 * 1000000L ? 20 * 1000000L : pause_ns * 2;
    }
    return false;
}
