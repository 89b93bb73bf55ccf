/*
 * child.h - the producer and consumer commands weir runs itself
 * (weir -O host:port -- zfs send ..., weir -I port -- zfs recv ...).
 *
 * Contract: child_spawn() runs on the engine's thread before any other
 * engine thread exists (it forks).  The command runs without a shell
 * (execvp), with its arguments as given, in weir's process group (so Ctrl-C
 * on a terminal reaches it directly, as in a shell pipeline), with SIGPIPE
 * and its signal mask at their defaults, every other weir descriptor closed
 * on exec, and SIGTERM sent to it should weir itself die
 * (PR_SET_PDEATHSIG).  A producer's standard input is /dev/null and its
 * standard output a pipe that weir reads; a consumer's standard input is a
 * pipe that weir writes and its standard output is weir's, or closed
 * (stdout_closed) when weir's was closed at startup, as a shell would leave
 * it: a consumer that writes there then fails instead of writing into the
 * /dev/null weir holds in its place.  Its standard error goes through a
 * pipe: a thread passes every byte on to weir's at
 * once, untouched, and keeps the last line for the message should the
 * command fail.  A command that cannot be started (not found, not
 * executable) fails child_spawn(), so it is reported before anything
 * connects.
 *
 * The transport that owns a child (transport_child) waits for it when it
 * closes: child_wait() returns its verdict.  child_signal() may be called
 * from any thread.
 */
#ifndef WEIR_CHILD_H
#define WEIR_CHILD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "transport/transport.h"
#include "weir/error.h"
#include "weir/log.h"

#define CHILD_GRACE_SECS 5.0   /* after SIGTERM, before SIGKILL */

enum child_role { CHILD_PRODUCER, CHILD_CONSUMER };

struct child {
    atomic_int pid;            /* 0 once it was waited for */
    enum child_role role;
    char name[300];            /* "producer 'zfs send -R pool@snap'" */
    struct weir_log *log;
    int err_fd;                /* read end of its stderr pipe, owned by err_thread */
    pthread_t err_thread;
    bool err_started;
    pthread_mutex_t lock;
    char last_line[256];       /* lock: the last non-empty line of its stderr */
    bool reaped;               /* lock: it exited and was waited for */
    int wstatus;               /* lock: its wait status, once reaped */
    atomic_int signalled;      /* a signal it was sent (by weir, or by the terminal) */
};

/* Start argv; *data_fd is weir's end of the data pipe (close-on-exec). */
int child_spawn(struct child *c, enum child_role role, char *const *argv, bool stdout_closed,
                struct weir_log *log, int *data_fd, struct weir_error *err);
/* Wait for it to exit.  When *stop is set while it runs, it is sent SIGTERM
 * (unless it was signalled already), and SIGKILL after CHILD_GRACE_SECS.
 * 0: it exited with status 0; -1: *err names it and says how it ended, with
 * its last line of stderr, and has the given exit status. */
int child_wait(struct child *c, atomic_bool *stop, int status, struct weir_error *err);
/* Whether it exited within secs (reaping it if so): a consumer that closed
 * its input has that long to say why before it is sent SIGTERM. */
bool child_exited_within(struct child *c, double secs);
/* Send sig, once: a child already signalled is left alone. */
void child_signal(struct child *c, int sig);
/* Record that the terminal sent sig to the whole process group. */
void child_signalled(struct child *c, int sig);
/* After child_wait: release the stderr thread and the lock. */
void child_release(struct child *c);

/* A child's data pipe as a transport.  Closing it with success ends the
 * child's input (or waits for the end of its output) and waits for its
 * verdict; without success a consumer is sent SIGTERM before its input
 * closes, so that a stream that failed never looks complete to it. */
void transport_child(struct transport *t, struct child *c, int fd);

#endif
