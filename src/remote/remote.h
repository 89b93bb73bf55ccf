/*
 * remote.h - the other end over ssh (--ssh): one command, two machines.
 *
 * Contract: the command line's side of a transfer whose other end is a
 * weir that ssh starts on another host (weir(1), SSH).  ssh only logs in
 * and carries a short conversation (doc/stream-format.md, "The ssh
 * channel"); the data goes directly over TCP between the two engines,
 * authenticated and encrypted as with --key-file, under a key made for
 * this one transfer.  The key and the remote command travel inside the
 * ssh channel, never on a command line or in an environment.
 *
 *   local push:  ssh starts in remote_configure(); the remote weir listens
 *                on the address ssh reached (SSH_CONNECTION) and says its
 *                port; the local engine sends there.
 *   local pull:  the same, the other way: the local engine receives over
 *                the connection it made to the remote weir's port.
 *   --connect-back: the local weir listens and the remote one connects to
 *                the address ssh came from; through ssh (--ssh-tunnel, or
 *                when no direct connection can be made) the stream travels
 *                on the ssh session itself.
 *   server:      weir --ssh-server, on the remote host: the request is read
 *                from standard input and answered on standard output, the
 *                remote command runs as the consumer (push) or producer
 *                (pull), and the weir exits as soon as its ssh session ends
 *                (unless the transfer may resume: then it ends as the
 *                transfer does, or when --reconnect runs out).
 *   resuming:    a push resumes after a break, directly, to the port the
 *                remote weir accepted it on; through ssh (the tunnel), a
 *                new ssh session relays the local weir to that port, or to
 *                one on the remote host's loopback (remote_relay).
 *
 * Every line the remote weir writes to its standard error appears locally
 * as "remote: ...".  remote_finish() gives the status of the whole chain:
 * the local engine's when it failed, else the remote weir's, else ssh's;
 * ssh itself failing (status 255) is WEIR_EXIT_NETWORK with ssh's last
 * line.  Nothing outlives the transfer: ssh is waited for (and killed after
 * session_silence(--timeout), twice), and the remote weir stops when its
 * channel closes.
 *
 * All calls are made from the engine's thread, after weir_signals_block()
 * (the threads this module starts inherit that mask).
 */
#ifndef WEIR_REMOTE_H
#define WEIR_REMOTE_H

#include "options/options.h"
#include "weir/error.h"
#include "weir/log.h"
#include "weir/weir.h"

#define REMOTE_PROTOCOL 1
#define REMOTE_REQUEST_MAX 65536   /* the request, in all */

struct remote;

/* The local end of weir --ssh HOST. */
int remote_local_new(struct remote **out, const struct weir_options *o, struct weir_log *log,
                     struct weir_error *err);
/* weir --ssh-server: read the request from standard input, parse the
 * options of the weir it asks for into *o (refused before any connection is
 * made when they are bad), and make the data's connection. */
int remote_server_new(struct remote **out, struct weir_log *log, struct weir_options *o,
                      struct weir_error *err);
/* Tell the local end the request was refused (a server that cannot start),
 * with the status the local weir then exits with; false when it could not
 * be told (then say it on standard error, which ssh carries too). */
bool remote_refuse(struct remote *r, int status, const char *msg);
/* Whether a refusal was told already (remote_server_new failed). */
bool remote_refused(const struct remote *r);
/* A server whose request was a tunnel's transfer coming back (a "rejoin",
 * through a new ssh session after a break): it runs no engine, only
 * remote_relay(), which carries the bytes between this ssh session and
 * the transfer's weir on this host until either side ends; its status. */
bool remote_rejoining(const struct remote *r);
int remote_relay(struct remote *r);
/* Before weir_create: the connection and the one-time key. */
int remote_configure(struct remote *r, struct weir_config *c, struct weir_error *err);
/* After weir_create: hand over or report the listening port. */
int remote_started(struct remote *r, struct weir_engine *e, struct weir_error *err);
/* After weir_run (or a failed start, with its status): the chain's status. */
int remote_finish(struct remote *r, int status);
void remote_free(struct remote *r);

#endif
