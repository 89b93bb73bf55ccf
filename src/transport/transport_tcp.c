/* transport_tcp.c - a TCP connection as a transport.  See src/transport/transport.h. */
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/transport.h"

static int tcp_half_close(struct transport *t, struct weir_error *err)
{
    if (t->fd >= 0 && shutdown(t->fd, SHUT_WR) != 0)
        return error_sys(err, t->status, errno, "%s: shutdown", t->name);
    return 0;
}

/* The close that follows resets the connection: a peer must not take an
 * unfinished stream for a clean end (a FIN would look like one to nc). */
static void tcp_abort(struct transport *t)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    if (t->fd >= 0)
        (void)setsockopt(t->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

static int tcp_close(struct transport *t, bool success, atomic_bool *stop,
                     struct weir_error *err)
{
    (void)stop;
    if (!success)
        tcp_abort(t);
    int rc = 0;
    if (t->fd >= 0 && close(t->fd) != 0 && errno != EINTR)
        rc = error_sys(err, t->status, errno, "%s: close", t->name);
    t->fd = -1;
    return rc;
}

static const struct transport_ops tcp_ops = {
    .read = transport_fd_read, .writev = transport_fd_writev, .wait = transport_fd_wait,
    .half_close = tcp_half_close, .abort = tcp_abort, .close = tcp_close,
};

void transport_tcp(struct transport *t, int fd, const char *name)
{
    transport_none(t);
    t->ops = &tcp_ops;
    t->kind = TRANSPORT_TCP;
    t->fd = fd;
    t->owned = true;
    t->is_socket = true;
    t->status = WEIR_EXIT_NETWORK;
    snprintf(t->name, sizeof t->name, "%s", name);
}
