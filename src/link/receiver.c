/*
 * receiver.c - a weir receiver dials its sender again, and learns whether
 * an older sender's TCP acknowledged the answer.  See receiver.h.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <sys/socket.h>

#include "base/sync.h"
#include "link/receiver.h"
#include "os/os.h"

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

int receiver_redial(const struct receiver_dial *d, double deadline, atomic_bool *stop,
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
