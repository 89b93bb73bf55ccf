/* child.c - see child.h. */
#include "transport/child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/sync.h"
#include "os/os.h"

static void pause_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* "producer 'zfs send -R pool@snap'", cut to fit; a command given to a
 * shell (sh -c 'zfs recv ...', as --ssh runs the remote one) is named by
 * what the shell was given */
static void child_name(struct child *c, char *const *argv)
{
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strcmp(base, "sh") == 0 && argv[1] && strcmp(argv[1], "-c") == 0 && argv[2] &&
        !argv[3])
        argv += 2;
    size_t len = (size_t)snprintf(c->name, sizeof c->name, "%s '",
                                  c->role == CHILD_PRODUCER ? "producer" : "consumer");
    for (int i = 0; argv[i] && len + 2 < sizeof c->name; i++)
        len += (size_t)snprintf(c->name + len, sizeof c->name - len, "%s%s", i ? " " : "",
                                argv[i]);
    if (len + 2 >= sizeof c->name)
        len = sizeof c->name - 5, memcpy(c->name + len, "...", 3), len += 3;
    c->name[len] = '\'';
    c->name[len + 1] = '\0';
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child_exec(const struct child *c, char *const *argv, int in, int out, int err,
                       int report, pid_t parent, bool close_out)
{
    os_die_with_parent(SIGTERM);
    if (getppid() != parent)
        _exit(127);   /* weir died before the line above took effect */
    if ((in >= 0 && dup2(in, STDIN_FILENO) < 0) || (out >= 0 && dup2(out, STDOUT_FILENO) < 0) ||
        dup2(err, STDERR_FILENO) < 0 || (close_out && close(STDOUT_FILENO) != 0)) {
        int e = errno;
        (void)!write(report, &e, sizeof e);
        _exit(127);
    }
    (void)c;
    os_close_inherited(report);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);   /* weir ignores it; a producer must die of it */
    execvp(argv[0], argv);
    int e = errno;
    (void)!write(report, &e, sizeof e);
    _exit(127);
}

/* Pass the child's stderr through as it comes, keeping its last line. */
static void *err_main(void *arg)
{
    struct child *c = arg;
    char buf[4096], line[sizeof c->last_line];
    size_t len = 0;
    bool mid_line = false;   /* what was passed on does not end with a newline */
    for (;;) {
        struct pollfd pfd = {.fd = c->err_fd, .events = POLLIN};
        int r = poll(&pfd, 1, 200);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            /* a grandchild may hold stderr open after the child exited */
            sync_lock(&c->lock);
            bool reaped = c->reaped;
            sync_unlock(&c->lock);
            if (reaped)
                break;
            continue;
        }
        ssize_t n = read(c->err_fd, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        log_passthrough(c->log, buf, (size_t)n);
        mid_line = buf[n - 1] != '\n';
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n' || buf[i] == '\r') {
                if (len > 0) {
                    sync_lock(&c->lock);
                    memcpy(c->last_line, line, len);
                    c->last_line[len] = '\0';
                    sync_unlock(&c->lock);
                }
                len = 0;
            } else if (len + 1 < sizeof line) {
                line[len++] = (unsigned char)buf[i] < 0x20 ? '?' : buf[i];
            }
        }
    }
    if (len > 0) {
        sync_lock(&c->lock);
        memcpy(c->last_line, line, len);
        c->last_line[len] = '\0';
        sync_unlock(&c->lock);
    }
    if (mid_line)
        log_passthrough(c->log, "\n", 1);   /* weir's own lines begin lines */
    close(c->err_fd);
    c->err_fd = -1;
    return NULL;
}

static void close_pair(int *p)
{
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
}

/* The child's exec: nothing comes through report (close-on-exec) when it
 * succeeded, its errno when it failed, and the child is then reaped. */
static int await_exec(struct child *c, int report, int *data_fd, int status,
                      struct weir_error *err)
{
    int exec_errno = 0;
    ssize_t got;
    do
        got = read(report, &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close(report);
    if (got <= 0)
        return 0;
    /* exec failed: the child has exited with 127 */
    waitpid(atomic_load(&c->pid), NULL, 0);
    atomic_store(&c->pid, 0);
    close(*data_fd), close(c->err_fd);
    *data_fd = c->err_fd = -1;
    return error_sys(err, status, exec_errno, "%s: cannot run it", c->name);
}

int child_spawn(struct child *c, enum child_role role, char *const *argv, bool stdout_closed,
                struct weir_log *log, int *data_fd, struct weir_error *err)
{
    memset(c, 0, sizeof *c);
    c->role = role;
    c->log = log;
    atomic_init(&c->pid, 0);
    c->err_fd = -1;
    atomic_init(&c->signalled, 0);
    sync_mutex_init(&c->lock);
    child_name(c, argv);
    int status = role == CHILD_PRODUCER ? WEIR_EXIT_INPUT : WEIR_EXIT_OUTPUT;
    int data[2] = {-1, -1}, errp[2] = {-1, -1}, report[2] = {-1, -1}, null = -1;
    if (os_pipe(data) || os_pipe(errp) || os_pipe(report) ||
        (role == CHILD_PRODUCER && (null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)) {
        int e = errno;
        close_pair(data), close_pair(errp), close_pair(report);
        return error_sys(err, WEIR_EXIT_INTERNAL, e, "%s: pipe", c->name);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (role == CHILD_PRODUCER)
            child_exec(c, argv, null, data[1], errp[1], report[1], parent, false);
        child_exec(c, argv, data[0], -1, errp[1], report[1], parent, stdout_closed);
    }
    int e = errno;
    if (null >= 0)
        close(null);
    close(errp[1]);
    close(report[1]);
    close(role == CHILD_PRODUCER ? data[1] : data[0]);
    *data_fd = role == CHILD_PRODUCER ? data[0] : data[1];
    if (pid < 0) {
        close(*data_fd), close(errp[0]), close(report[0]);
        return error_sys(err, WEIR_EXIT_INTERNAL, e, "%s: fork", c->name);
    }
    atomic_store(&c->pid, pid);
    c->err_fd = errp[0];
    if (await_exec(c, report[0], data_fd, status, err))
        return -1;
    /* the thread starts with every signal blocked: only the engine's own
     * threads take them (weir_create lets some in while it sets up) */
    sigset_t all, was;
    sigfillset(&all);
    sync_sigmask_get(SIG_SETMASK, &all, &was);
    int started = sync_create(&c->err_thread, err_main, c, err);
    sync_sigmask(SIG_SETMASK, &was);
    if (started) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        atomic_store(&c->pid, 0);
        close(*data_fd), close(c->err_fd);
        *data_fd = c->err_fd = -1;
        return -1;
    }
    c->err_started = true;
    return 0;
}

void child_signal(struct child *c, int sig)
{
    int none = 0;
    pid_t pid = atomic_load(&c->pid);
    /* a child waited for has pid 0: its number may belong to another now */
    if (pid > 0 && atomic_compare_exchange_strong(&c->signalled, &none, sig))
        (void)kill(pid, sig);
}

void child_signalled(struct child *c, int sig)
{
    int none = 0;
    atomic_compare_exchange_strong(&c->signalled, &none, sig);
}

/* The child died of a SIGINT, SIGTERM or SIGHUP that weir has too, not
 * yet taken (they stay blocked until the main thread takes them): one sent
 * to the process group, from the terminal or a `kill 0`.  That signal is
 * the reason, whichever of the two is noticed first. */
static bool shared_stop(int sig)
{
    if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP)
        return false;
    sigset_t pending;
    return sigpending(&pending) == 0 && sigismember(&pending, sig) == 1;
}

/* How it ended, for messages: "exited with status 1: <its last line>". */
static int verdict(struct child *c, int ws, int status, struct weir_error *err)
{
    sync_lock(&c->lock);
    char last[sizeof c->last_line];
    memcpy(last, c->last_line, sizeof last);
    sync_unlock(&c->lock);
    const char *sep = last[0] ? ": " : "";
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
        return 0;
    if (WIFEXITED(ws))
        return error_set(err, status, "%s exited with status %d%s%s", c->name,
                         WEXITSTATUS(ws), sep, last);
    if (WIFSIGNALED(ws) && shared_stop(WTERMSIG(ws)))
        return error_set(err, WEIR_EXIT_SIGNAL + WTERMSIG(ws), "interrupted by SIG%s",
                         sync_signal_name(WTERMSIG(ws)) ? sync_signal_name(WTERMSIG(ws)) : "?");
    if (WIFSIGNALED(ws)) {
        const char *abbrev = sync_signal_name(WTERMSIG(ws));
        return error_set(err, status, "%s was killed by SIG%s%s%s", c->name,
                         abbrev ? abbrev : "?", sep, last);
    }
    return error_set(err, status, "%s ended with wait status %d", c->name, ws);
}

static void reaped(struct child *c, int ws)
{
    sync_lock(&c->lock);
    c->reaped = true;
    c->wstatus = ws;
    sync_unlock(&c->lock);
    atomic_store(&c->pid, 0);
}

bool child_exited_within(struct child *c, double secs)
{
    pid_t pid = atomic_load(&c->pid);
    double until = clock_now() + secs;
    while (pid > 0) {
        int ws;
        pid_t r = waitpid(pid, &ws, WNOHANG);
        if (r == pid) {
            reaped(c, ws);
            return true;
        }
        if ((r < 0 && errno != EINTR) || clock_now() >= until)
            return false;
        pause_ms(20);
    }
    return true;
}

int child_wait(struct child *c, atomic_bool *stop, int status, struct weir_error *err)
{
    pid_t pid = atomic_load(&c->pid);
    double kill_at = 0;
    bool killed = false;
    while (pid > 0) {
        if (stop && atomic_load(stop) && kill_at == 0) {
            child_signal(c, SIGTERM);   /* nothing if it was signalled already */
            kill_at = clock_now() + CHILD_GRACE_SECS;
        }
        if (kill_at > 0 && !killed && clock_now() >= kill_at) {
            (void)kill(pid, SIGKILL);
            killed = true;
        }
        /* blocking until weir stops (the wake-up signal interrupts it),
         * then polling through the grace period */
        int ws;
        pid_t r = waitpid(pid, &ws, kill_at > 0 ? WNOHANG : 0);
        if (r == pid) {
            reaped(c, ws);
            break;
        }
        if (r == 0) {
            pause_ms(20);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        return error_sys(err, status, errno, "%s: waitpid", c->name);
    }
    sync_lock(&c->lock);
    bool ended = c->reaped;
    int ws = c->wstatus;
    sync_unlock(&c->lock);
    if (!ended)
        return 0;   /* never started */
    if (c->err_started) {
        sync_join(c->err_thread);   /* its last line is complete */
        c->err_started = false;
    }
    return verdict(c, ws, status, err);
}

void child_release(struct child *c)
{
    pid_t pid = atomic_load(&c->pid);
    if (pid > 0) {
        /* never waited for (a failed start): it must not outlive weir */
        (void)kill(pid, SIGKILL);
        int ws;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
        }
        reaped(c, ws);
    }
    if (c->err_started) {
        sync_join(c->err_thread);
        c->err_started = false;
    }
}

/* ---- the child's data pipe as a transport ------------------------------- */

static int child_half_close(struct transport *t, struct weir_error *err)
{
    (void)err;
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    return 0;
}

static void child_abort(struct transport *t)
{
    if (t->child)   /* NULL once closed */
        child_signal(t->child, SIGTERM);
}

/* A consumer whose stream failed is stopped before its input ends, and its
 * input stays open until it is gone (SIGTERM, then SIGKILL after the grace
 * period): one that ignores SIGTERM must not read a clean end of a stream
 * that is not whole. */
static void stop_consumer(struct child *c)
{
    child_signal(c, SIGTERM);
    if (c->role != CHILD_CONSUMER || child_exited_within(c, CHILD_GRACE_SECS))
        return;
    pid_t pid = atomic_load(&c->pid);
    if (pid > 0)
        (void)kill(pid, SIGKILL);
    (void)child_exited_within(c, CHILD_GRACE_SECS);
}

/* Every byte is written: wait until the consumer has read them all (the
 * pipe is empty) or has exited.  What a consumer leaves in the pipe when it
 * exits, even with status 0, it did not read: less than a pipe's worth
 * never makes a write fail, so only this finds it.  Bytes unread, or 0. */
static int unread_at_exit(struct transport *t, atomic_bool *stop)
{
    for (;;) {
        int queued = 0;
        if (ioctl(t->fd, FIONREAD, &queued) != 0 || queued <= 0)
            return 0;   /* read, or the pipe cannot say */
        if (child_exited_within(t->child, 0))
            return queued;
        if (stop && atomic_load(stop))
            return 0;
        pause_ms(5);
    }
}

static int child_close(struct transport *t, bool success, atomic_bool *stop,
                       struct weir_error *err)
{
    if (!t->child)
        return 0;
    if (!success)
        stop_consumer(t->child);
    int unread = success && t->child->role == CHILD_CONSUMER && t->fd >= 0
                     ? unread_at_exit(t, stop)
                     : 0;
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    int rc = child_wait(t->child, stop, t->status, err);
    if (rc == 0 && unread > 0)
        rc = error_set(err, t->status, "%s exited with status 0 before it read all its "
                       "input (%d bytes unread)", t->child->name, unread);
    t->child = NULL;
    return rc;
}

static const struct transport_ops child_ops = {
    .read = transport_fd_read,
    .writev = transport_fd_writev,
    .wait = transport_fd_wait,
    .half_close = child_half_close,
    .abort = child_abort,
    .close = child_close,
};

void transport_child(struct transport *t, struct child *c, int fd)
{
    transport_none(t);
    t->ops = &child_ops;
    t->kind = TRANSPORT_CHILD;
    t->fd = fd;
    t->child = c;
    t->owned = true;
    t->status = c->role == CHILD_PRODUCER ? WEIR_EXIT_INPUT : WEIR_EXIT_OUTPUT;
    snprintf(t->name, sizeof t->name, "%s", c->name);
}
