/*
 * systemd.h - what a service says to systemd and takes from it, without
 * libsystemd: the listening sockets of socket activation and the state
 * notifications of Type=notify.
 *
 * Contract: systemd_sockets() takes the sockets systemd passed this process
 * (LISTEN_PID is its pid; LISTEN_FDS of them, from descriptor 3 on), checks
 * each is a listening socket, makes them close-on-exec and non-blocking,
 * and takes the three variables out of the environment, so that nothing
 * the service runs sees them.  systemd_notify() sends one datagram to the
 * NOTIFY_SOCKET path the caller kept (a path, or @name for an abstract
 * socket; "" sends nothing); a failure is logged, not fatal.
 */
#ifndef WEIR_SERVE_SYSTEMD_H
#define WEIR_SERVE_SYSTEMD_H

#include "transport/tcp.h"
#include "weir/error.h"
#include "weir/log.h"

/* 1 with *n listeners in l, 0 when systemd passed none, -1 with *err. */
int systemd_sockets(struct tcp_listener *l, int max, int *n, struct weir_error *err);
void systemd_notify(const char *path, const char *state, struct weir_log *log);

#endif
