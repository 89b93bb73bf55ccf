/*
 * serve_int.h - between the service (serve.c) and one transfer's process
 * (transfer.c).
 *
 * The service forks a process for each connection it accepts.  That
 * process admits the sender (greeting, TLS handshake, header and target:
 * link/listener.h), finds the target its key and request name, and asks
 * the service over a datagram socket whether it may run:
 *
 *   transfer -> service   "claim CLIENT TARGET"
 *   service -> transfer   "ok", or "no REASON" (busy, full, stopping)
 *   transfer -> service   "end BYTES SECONDS STATUS" when it is over
 *
 * so the service alone counts transfers and knows who runs, and nothing of
 * a transfer (its buffer, its consumer, a crash) is in the service's
 * process.  A process that never claims ends within the handshake's limit.
 */
#ifndef WEIR_SERVE_INT_H
#define WEIR_SERVE_INT_H

#include <signal.h>
#include <stdint.h>

#include "crypto/tls.h"
#include "serve/conf.h"
#include "weir/log.h"

#define SERVE_MSG_MAX 512
#define SERVE_LISTEN_MAX 8      /* sockets systemd may pass */
#define SERVE_CLAIM_SECS 10.0   /* the service answers a claim at once; bound it all the same */
/* a claim for a target whose last transfer is still ending (its sender has
 * the answer, its process is not yet gone) waits this long for it */
#define SERVE_CLAIM_WAIT_SECS 5.0

struct serve_child {
    const struct serve_conf *conf;
    struct tls_context *tls;
    int conn;                  /* the accepted connection */
    int control;               /* to the service */
    char peer[80];             /* the connection's address, for messages */
    struct weir_log *log;
    const sigset_t *mask;      /* the signals to take once its handlers are its own */
};

/* Run one connection's transfer in this (forked) process: its exit status. */
int serve_transfer(const struct serve_child *c);

#endif
