/*
 * tcp.h - listening, connecting and tuning TCP sockets, with settings of
 * their own (the engine passes a struct tcp_settings, from weir.h, never
 * the command line).
 *
 * Contract: each function reports failure in a weir_error with status
 * WEIR_EXIT_NETWORK and a message naming the address.  They never print,
 * except that tcp_connect() logs its first retry.  The listening socket is
 * bound while the engine is created, so "listening on ..." appears at once;
 * the reader thread admits a sender on it (listener.h).  tcp_connect() runs
 * on an output's writer thread and retries until the connect timeout;
 * blocking waits return ECANCELED promptly once *stop is set and the thread
 * is sent the engine's wake-up signal.
 */
#ifndef WEIR_TCP_H
#define WEIR_TCP_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "weir/error.h"
#include "weir/log.h"
#include "weir/weir.h"

#define TCP_MAX_ALLOWED 16

struct tcp_listener {
    int fd;
    /* fd is not a listening socket but one end of a local socket on which
     * connections arrive whole (tcp_take_fd), greeted already by whoever
     * accepted them (weir --serve's service hands a transfer's process the
     * connections that come back to it) */
    bool handoff;
    char addr[80];                 /* "[::]:1234" or "127.0.0.1:1234" */
    char allow_name[256];          /* the allowed host as given, or "" for anyone */
    struct sockaddr_storage allowed[TCP_MAX_ALLOWED];
    int nallowed;
};

/* Bind and listen (non-blocking) as the settings say; fills addr. */
int tcp_listen(const struct tcp_settings *s, struct tcp_listener *l, struct weir_error *err);
/* A listening socket made elsewhere becomes l, with the settings'
 * allow-list; fd is l's (closed) even on failure. */
int tcp_listener_adopt(const struct tcp_settings *s, int fd, struct tcp_listener *l,
                       struct weir_error *err);
void tcp_listener_close(struct tcp_listener *l);
/* Hand the descriptor fd over the local socket via (SCM_RIGHTS), with a
 * short message; 0, or -1 with errno.  fd stays the caller's. */
int tcp_pass_fd(int via, int fd, const void *msg, size_t len);
/* Take a descriptor handed over on via (non-blocking, close-on-exec):
 * the descriptor, or -1 with errno (EAGAIN: none waits; EBADMSG: a message
 * without one). */
int tcp_take_fd(int via);
/* Whether peer may connect: the allow-list, or anyone. */
bool tcp_peer_allowed(const struct tcp_listener *l, const struct sockaddr *peer);
/* Connect to host:port, retrying until the connect timeout; *fd is a tuned,
 * non-blocking socket.  name is what messages call it. */
int tcp_connect(const char *host, const char *port, const struct tcp_settings *s,
                atomic_bool *stop, struct weir_log *log, const char *name, int *fd,
                struct weir_error *err);
/* Connect to one address as it is (a link test's data connections go where
 * its control connection went), within timeout seconds, marked as any weir
 * connection is, and tuned; the wait looks at *stop every 100 ms.  0, or
 * -1 with errno. */
int tcp_connect_addr(const struct sockaddr *sa, socklen_t len, double timeout,
                     double io_timeout, atomic_bool *stop, int *fd);
/* Keepalive, TCP_USER_TIMEOUT, TCP_NODELAY and non-blocking mode. */
int tcp_tune(int fd, double io_timeout);
/* A weir sender marks the SYN of its connection (a connection that is not
 * --raw) with this traffic class (DSCP 1, "lower effort"; the class is reset
 * once connected), so that a listener that also takes plain bytes (weir
 * under the name mbuffer) can greet it at once, and never greets a plain
 * sender: a greeting that mbuffer never reads turns its close into a reset,
 * which can discard its last bytes.  A network that rewrites the class only
 * loses the mark: such a sender then falls back to plain bytes. */
#define TCP_WEIR_MARK 0x04
/* Whether an accepted connection's SYN carried the mark (the listening
 * socket keeps SYNs; reading it frees it). */
bool tcp_syn_marked(int fd);
/* Render a socket address as "1.2.3.4:5" or "[::1]:5". */
void tcp_format_addr(const struct sockaddr *sa, char *buf, size_t len);

#endif
