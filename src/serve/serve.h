/*
 * serve.h - weir --serve FILE: a permanent backup target for many clients.
 *
 * Contract: serve_main() reads FILE (conf.h, weir.conf(5)) and its key
 * file, listens where FILE says (or on the sockets systemd passes:
 * LISTEN_PID and LISTEN_FDS), and runs until SIGTERM or SIGINT.  Each
 * accepted connection is handled in a process of its own (serve_int.h):
 * it admits keyed senders only, runs the target that the sender's key and
 * its --target name, and nothing else; a crash or a hang there touches no
 * other transfer and not the service.  The service itself:
 *
 *   - counts transfers: at most max-transfers at once, and one for each
 *     client and target; a sender beyond either is told it is busy;
 *   - keeps at most SERVE_PENDING_MAX connections being admitted, at most
 *     SERVE_PER_ADDRESS of them from one address; a crowd beyond that is
 *     closed unheard (and counted in the log);
 *   - logs one line when a transfer starts and one when it ends (client,
 *     target, peer, bytes, seconds, rate, status);
 *   - on SIGHUP reads FILE and the keys again; a file or key that does not
 *     load is refused with its file and line, and the old ones stay;
 *     running transfers are not touched;
 *   - on SIGTERM or SIGINT stops accepting, gives the running transfers
 *     SERVE_STOP_SECS to end, then stops them (SIGTERM: each tells its
 *     sender), and SIGKILLs what is left SERVE_KILL_SECS later;
 *   - tells systemd (NOTIFY_SOCKET) when it is ready, reloading and
 *     stopping.
 *
 * It returns 0 after a stop, WEIR_EXIT_USAGE for a configuration or key
 * file that does not load at the start, and WEIR_EXIT_NETWORK when it
 * cannot listen.
 */
#ifndef WEIR_SERVE_H
#define WEIR_SERVE_H

#include "weir/log.h"

#define SERVE_PENDING_MAX 64
#define SERVE_PER_ADDRESS 16   /* of them from one address */
#define SERVE_STOP_SECS 60.0
#define SERVE_KILL_SECS 10.0

int serve_main(const char *conf_path, struct weir_log *log);

#endif
