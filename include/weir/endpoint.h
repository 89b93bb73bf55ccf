/*
 * endpoint.h - the things weir reads from and writes to: stdin, stdout,
 * files, and TCP connections made by listening (-I) or connecting (-O).
 *
 * Contract: each function opens or closes one endpoint and reports failure in
 * a weir_error whose message names the endpoint ("output /mnt/x: ...").  They
 * never print, except that tcp_connect() logs retries.  Admitting a sender
 * on a listening socket is listener.c's.  An endpoint is owned by the one thread that does its
 * I/O.  Blocking calls (accept, connect) return ECANCELED promptly once *stop
 * is set and the calling thread is sent the pipeline's wake-up signal.
 *
 * Files are opened by main() before any thread starts, so a refused -o (an
 * existing file without -f) is reported before any byte moves.  The listening
 * socket is bound at setup too, so "listening on ..." appears at once; the
 * reader thread admits a sender (listener.h).  Outgoing connections are made by each output's
 * writer thread, which retries until --connect-timeout.
 */
#ifndef WEIR_ENDPOINT_H
#define WEIR_ENDPOINT_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "weir/error.h"
#include "weir/log.h"
#include "weir/options.h"

struct endpoint {
    int fd;              /* -1 when not open */
    char name[300];      /* for messages: "<stdin>", "<stdout>", a path, host:port */
    const char *path;    /* a file weir opened by name, or NULL */
    bool is_socket;
    bool owned;          /* weir opened it and must close it */
    bool regular;        /* a regular file */
    bool blockdev;       /* a block device */
    bool created;        /* weir created the file (its directory entry is new) */
    bool identified;     /* dev and ino below are valid */
    dev_t dev;
    ino_t ino;
    mode_t mode;
};

void endpoint_none(struct endpoint *ep);
/* path NULL or "-": stdin; closed says descriptor 0 was closed when weir
 * started (main() put /dev/null there), which is an input error, not an
 * empty input.  Input errors are WEIR_EXIT_INPUT. */
int endpoint_open_input(const char *path, bool closed, struct endpoint *ep,
                        struct weir_error *err);
/* path "-": stdout (closed: as for stdin).  An existing regular file is
 * refused unless force; it is not truncated yet (endpoint_truncate), so
 * that a start that fails later leaves it untouched. */
int endpoint_open_output(const char *path, bool force, bool closed, struct endpoint *ep,
                         struct weir_error *err);
/* -f: empty an existing regular output, once every check has passed. */
int endpoint_truncate(struct endpoint *ep, struct weir_error *err);
/* True when a and b are one file, so that writing one destroys the other.
 * Character devices (/dev/null, a terminal) and sockets are never "the
 * same file": writing them does not change what reading them gives. */
bool endpoint_same_file(const struct endpoint *a, const struct endpoint *b);
/* Record the identity of an open descriptor that is not an endpoint (the
 * -l file), for endpoint_same_file. */
void endpoint_identify(struct endpoint *ep, int fd, const char *name);
/* Flush a regular file or block device to stable storage (fdatasync), and
 * the directory of a file weir created (fsync), so that success is only
 * reported for data a crash cannot take back.  Anything else: nothing. */
int endpoint_sync(struct endpoint *ep, struct weir_error *err);
/* Remove a file weir created, after a start that failed. */
void endpoint_discard(struct endpoint *ep);
/* Close, reporting errors that only appear at close (NFS, some quotas).
 * status is the exit status to use for such an error. */
int endpoint_close(struct endpoint *ep, int status, struct weir_error *err);

#define TCP_MAX_ALLOWED 16

struct tcp_listener {
    int fd;
    char addr[80];                 /* "[::]:1234" or "127.0.0.1:1234" */
    char allow_name[256];          /* -I HOST, or "" for anyone */
    struct sockaddr_storage allowed[TCP_MAX_ALLOWED];
    int nallowed;
};

/* Bind and listen as -I, --bind, -4 and -6 say; fills addr. WEIR_EXIT_NETWORK. */
int tcp_listen(const struct weir_options *o, struct tcp_listener *l, struct weir_error *err);
/* Whether peer may connect: the -I HOST allow-list, or anyone. */
bool tcp_peer_allowed(const struct tcp_listener *l, const struct sockaddr *peer);
void tcp_listener_close(struct tcp_listener *l);
/* Connect to host:port, retrying until timeout_s (0: one attempt). */
int tcp_connect(const struct output_spec *spec, const struct weir_options *o,
                atomic_bool *stop, struct weir_log *log, struct endpoint *ep,
                struct weir_error *err);
/* Keepalive, TCP_USER_TIMEOUT and non-blocking mode for a connected socket. */
int tcp_tune(int fd, double io_timeout);
/* Render a socket address as "1.2.3.4:5" or "[::1]:5". */
void tcp_format_addr(const struct sockaddr *sa, char *buf, size_t len);

#endif
