/* remote.c - see remote.h. */
#include "crypto/secret.h"
#include "remote/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/sync.h"
#include "crypto/keyfile.h"
#include "link/session.h"
#include "os/os.h"
#include "transport/tcp.h"

#ifndef WEIR_VERSION
#define WEIR_VERSION "0.0.0"
#endif

#define KEY_TEXT_MAX 256
#define KEY_NAME "ssh-one-time"
#define REMOTE_ARGS_MAX 64
#define REMOTE_START_SECS 120.0   /* for ssh to log in and the remote weir to answer */
#define REQUEST_SECS 30.0         /* for the request, once the remote weir runs */
#define REMOTE_SETTLE_MS 3000     /* for the engine to learn why the remote end failed */
#define DIRECT_SECS 5.0           /* to make the direct connection, before the tunnel */
#define RELAY_CHUNK (256 << 10)

struct remote {
    bool server;
    struct weir_log *log;
    const struct weir_options *o;   /* local */
    /* the channel: local, our end of ssh's standard input and output;
     * server, the ssh session's standard input and output */
    int ctl_in, ctl_out;
    char *key;                       /* secret memory: the key file's line */
    int key_len;
    /* local */
    pid_t ssh_pid;
    int ssh_status;                  /* its wait status, once reaped */
    bool ssh_reaped;
    bool ssh_stopped;                /* this weir signalled it, after a failure */
    int err_fd;                      /* ssh's standard error */
    pthread_t err_thread;
    bool err_started;
    atomic_bool err_stop;
    pthread_mutex_t lock;
    char last_line[256];             /* lock: the last line ssh's standard error carried */
    char ssh_line[256];              /* lock: the last of them that was ssh's own */
    char held[256];                  /* lock: ssh's latest line before the remote weir
                                        answered, not yet shown: a failure's message
                                        may carry it instead (held_show, held_drop) */
    bool holding;                    /* lock: held is there */
    bool said_why;                   /* the start's failure gave ssh's status and words */
    bool ready;                      /* lock: the remote weir answered */
    char addr[80], port[16];         /* where the remote weir listens ("listen") */
    char remote_version[32];
    bool too_old;                    /* the remote weir does not know --ssh-server */
    struct tcp_listener back;        /* --connect-back: where the remote weir connects */
    /* both: the data's connection, for the engine (-1 once it took it);
     * tunnel: it is the ssh channel (no key: ssh encrypts) */
    int data_fd;
    bool tunnel;
    /* local: the data has a connection of its own, so the ssh channel
     * carries only lines (and an "end" is read as one); until then the
     * remote weir may have made the channel the stream itself */
    bool direct;
    char data_name[200];
    /* server */
    bool push;                       /* the remote end receives */
    int path;                        /* SSH_PATH_*, from the request */
    int back_port;                   /* --connect-back: the local weir's port, else 0 */
    /* both, when this end receives over a connection it accepted (a push
     * made directly; a pull connected back): the listening socket, kept for
     * the engine, to which a broken session's sender comes back */
    struct tcp_listener keep;
    char keep_host[64];              /* server: who comes back to it (the tunnel's: this host) */
    bool ssh_lost;                   /* the ssh session ended while the transfer could resume */
    double reconnect;                /* --reconnect, this end's */
    /* the tunnel (a push): where the remote weir waits for a broken
     * transfer to come back, which a new ssh session reaches from its host
     * (local: to dial through; server --ssh-server with a "rejoin" request:
     * to connect to and relay) */
    char rejoin_addr[80], rejoin_port[16];
    bool rejoin;                     /* server: this session only relays a rejoining tunnel */
    /* both: the address this end's data connection reached, to reach it
     * there again after a break (it dialled; the other end keeps its port) */
    struct sockaddr_storage again;
    socklen_t again_len;
    /* tunnel: the engine's end of a socket pair, relayed to and from the
     * ssh session's standard input and output */
    int relay[2];
    pthread_t relay_in, relay_out;
    bool relay_in_started, relay_out_started;
    char peer[64], self[64];         /* SSH_CONNECTION: where ssh came from, where it arrived */
    char *request;                   /* its text; argv points into it */
    char *argv[REMOTE_ARGS_MAX + 16];
    bool refused;                    /* the local end was told why it cannot start */
    /* both, while no engine runs yet (its signals are blocked and not yet
     * taken): halt.halt is set when SIGINT, SIGTERM or SIGHUP is pending,
     * and every wait of the start (ssh, the conversation, the data's
     * connection) gives up for it */
    struct sync_stop_watch halt;
    /* both: the thread that watches the ssh channel while the engine runs */
    struct weir_engine *engine;
    int wake[2];
    pthread_t watch_thread;
    bool watch_started;
};

static void *relay_in_main(void *arg);
static void *relay_out_main(void *arg);

/* ---- lines on the channel ------------------------------------------------- */

/* Lines are read a byte at a time: what follows them on the channel may be
 * the stream itself (the tunnel), and belongs to the engine. */
struct reader {
    int fd;
    double deadline;
    atomic_bool *halt;       /* set: the wait gives up (ECANCELED) */
};

/* A start given up for a signal: the status the engine would give it. */
static int halted(struct remote *r, const char *what, struct weir_error *err)
{
    int sig = atomic_load(&r->halt.sig);
    const char *name = sync_signal_name(sig);
    return error_set(err, WEIR_EXIT_SIGNAL + sig, "interrupted by SIG%s while %s",
                     name ? name : "?", what);
}

/* One byte, by the deadline: 1, 0 at the end, -1 with errno. */
static int get_byte(struct reader *rd, char *c)
{
    for (;;) {
        int left = (int)((rd->deadline - clock_now()) * 1000);
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (atomic_load(rd->halt)) {
            errno = ECANCELED;
            return -1;
        }
        struct pollfd pfd = {.fd = rd->fd, .events = POLLIN};
        int r = poll(&pfd, 1, left < 200 ? left : 200);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            continue;
        ssize_t n = read(rd->fd, c, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        return n < 0 ? -1 : (int)n;
    }
}

/* A line without its newline, NUL-ended: its length, or -1 (errno; EPIPE
 * for the end of the channel, EMSGSIZE for a line too long). */
static long get_line(struct reader *rd, char *line, size_t cap)
{
    size_t n = 0;
    for (;;) {
        char c;
        int r = get_byte(rd, &c);
        if (r <= 0) {
            if (r == 0)
                errno = EPIPE;
            return -1;
        }
        if (c == '\n')
            break;
        if (n + 1 >= cap) {
            errno = EMSGSIZE;
            return -1;
        }
        line[n++] = c;
    }
    line[n] = '\0';
    return (long)n;
}

static int put_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- the local end: ssh ---------------------------------------------------- */

/* Show the line held back, if any (it was not the last before a failure). */
static void held_show(struct remote *r)
{
    char line[sizeof r->held];
    sync_lock(&r->lock);
    bool show = r->holding;
    r->holding = false;
    snprintf(line, sizeof line, "%s", r->held);
    sync_unlock(&r->lock);
    if (show)
        log_msg(r->log, LOG_ERROR, "ssh %s: %s", r->o->ssh_host, line);
}

/* The line held back is the failure's message: it is not shown twice. */
static void held_drop(struct remote *r)
{
    sync_lock(&r->lock);
    r->holding = false;
    sync_unlock(&r->lock);
}

/* Pass ssh's standard error on, line by line: the remote weir's own lines
 * (and, once it answered, its command's) as "remote: ...", ssh's as
 * "ssh HOST: ...".  The last line is kept for a failure's message.  Before
 * the remote weir answered, each line of ssh's is shown only once the next
 * comes: the last one before ssh gives up ("Could not resolve hostname")
 * is the message of the failure, not a line of its own beside it. */
static void pass_line(struct remote *r, const char *line)
{
    bool weirs = strncmp(line, "weir: ", 6) == 0;
    /* what ssh itself says when its connection ends, even once the remote
     * weir answered */
    static const char *const ssh_own[] = {"Connection to ", "Connection closed by ",
                                          "client_loop: ", "ssh: ", "Timeout, server "};
    bool own = false;
    for (size_t i = 0; i < sizeof ssh_own / sizeof *ssh_own; i++)
        own = own || strncmp(line, ssh_own[i], strlen(ssh_own[i])) == 0;
    char before[sizeof r->held];
    sync_lock(&r->lock);
    snprintf(r->last_line, sizeof r->last_line, "%s", line);
    bool remote = weirs || (r->ready && !own), ssh = !remote && line[0];
    if (ssh)
        snprintf(r->ssh_line, sizeof r->ssh_line, "%s", line);
    bool shown = r->holding && (remote || ssh), hold = ssh && !r->ready;
    snprintf(before, sizeof before, "%s", r->held);
    r->holding = r->holding && !shown;
    if (hold) {
        snprintf(r->held, sizeof r->held, "%s", line);
        r->holding = true;
    }
    sync_unlock(&r->lock);
    if (shown)
        log_msg(r->log, LOG_ERROR, "ssh %s: %s", r->o->ssh_host, before);
    if (hold)
        return;
    if (remote)
        log_msg(r->log, LOG_ERROR, "remote: %s", weirs ? line + 6 : line);
    else if (ssh)
        log_msg(r->log, LOG_ERROR, "ssh %s: %s", r->o->ssh_host, line);
}

static void *err_main(void *arg)
{
    struct remote *r = arg;
    char buf[4096], line[512];
    size_t len = 0;
    for (;;) {
        struct pollfd pfd = {.fd = r->err_fd, .events = POLLIN};
        int p = poll(&pfd, 1, 200);
        if (p < 0 && errno == EINTR)
            continue;
        if (p == 0) {
            if (atomic_load(&r->err_stop))
                break;   /* something ssh started still holds its stderr */
            continue;
        }
        ssize_t n = p < 0 ? -1 : read(r->err_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                line[len] = '\0';
                pass_line(r, line);
                len = 0;
            } else if (buf[i] != '\r' && len + 1 < sizeof line) {
                line[len++] = (unsigned char)buf[i] < 0x20 ? '?' : buf[i];
            }
        }
    }
    if (len > 0) {
        line[len] = '\0';
        pass_line(r, line);
    }
    return NULL;
}

/* 'PATH' for the remote shell, however PATH is spelt. */
static int shell_quote(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    if (cap < 3)
        return -1;
    dst[n++] = '\'';
    for (; *s; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t plen = piece ? 4 : 1;
        if (n + plen + 2 > cap)
            return -1;
        if (piece)
            memcpy(dst + n, piece, plen);
        else
            dst[n] = *s;
        n += plen;
    }
    dst[n++] = '\'';
    dst[n] = '\0';
    return 0;
}

/* In the child, between fork and exec: only async-signal-safe calls.
 * tied: SIGTERM when the forking thread ends (the main thread's ssh dies
 * with this weir); a tunnel's later sessions are forked by a writer, which
 * ends before its transfer's ssh does, and are stopped by remote_free. */
static void exec_ssh(int ctl, int errfd, char *const *argv, pid_t parent, bool tied)
{
    if (tied)
        os_die_with_parent(SIGTERM);
    if (getppid() != parent)
        _exit(127);
    if (dup2(ctl, STDIN_FILENO) < 0 || dup2(ctl, STDOUT_FILENO) < 0 ||
        dup2(errfd, STDERR_FILENO) < 0)
        _exit(127);
    os_close_inherited(-1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    execv("/bin/sh", argv);
    _exit(127);
}

/* sh -c 'exec RSH "$@"' weir-ssh HOST 'REMOTE-WEIR' --ssh-server: the --rsh
 * string is the local shell's to split (as rsync's --rsh is), the host and
 * the remote weir's name are arguments, never spliced into it. */
static int spawn_ssh(struct remote *r, bool tied, struct weir_error *err)
{
    const struct weir_options *o = r->o;
    char script[1200], remote_cmd[1200];
    if (snprintf(script, sizeof script, "exec %s \"$@\"", o->rsh ? o->rsh : "ssh") >=
            (int)sizeof script ||
        shell_quote(remote_cmd, sizeof remote_cmd - 16, o->remote_weir ? o->remote_weir
                                                                       : "weir"))
        return error_set(err, WEIR_EXIT_USAGE, "--rsh or --remote-weir: too long");
    strcat(remote_cmd, " --ssh-server");
    char *argv[] = {"/bin/sh", "-c", script, "weir-ssh", (char *)o->ssh_host, remote_cmd,
                    NULL};
    int sp[2], ep[2] = {-1, -1};
    if (os_socketpair(sp) != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "ssh %s: socketpair", o->ssh_host);
    if (os_pipe(ep) != 0) {
        int e = errno;
        close(sp[0]), close(sp[1]);
        return error_sys(err, WEIR_EXIT_INTERNAL, e, "ssh %s: pipe", o->ssh_host);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_ssh(sp[1], ep[1], argv, parent, tied);
    int e = errno;
    close(sp[1]);
    close(ep[1]);
    if (pid < 0) {
        close(sp[0]), close(ep[0]);
        return error_sys(err, WEIR_EXIT_INTERNAL, e, "ssh %s: fork", o->ssh_host);
    }
    sync_lock(&r->lock);
    r->ssh_pid = pid;   /* the watch thread reads it */
    r->ssh_reaped = false;
    sync_unlock(&r->lock);
    r->ctl_in = r->ctl_out = sp[0];
    r->err_fd = ep[0];
    if (sync_create(&r->err_thread, err_main, r, err))
        return -1;
    r->err_started = true;
    return 0;
}

/* Wait for ssh up to secs; true once it was reaped. */
static bool ssh_reap(struct remote *r, double secs)
{
    double until = clock_now() + secs;
    while (!r->ssh_reaped && r->ssh_pid > 0) {
        int ws;
        pid_t got = waitpid(r->ssh_pid, &ws, WNOHANG);
        if (got == r->ssh_pid) {
            r->ssh_reaped = true;
            r->ssh_status = ws;
            break;
        }
        if ((got < 0 && errno != EINTR) || clock_now() >= until)
            return false;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return true;
}

/* A copy of one of the lines the stderr thread keeps (last_line, ssh_line). */
static void kept_line(struct remote *r, const char *line, char *dst, size_t cap)
{
    sync_lock(&r->lock);
    snprintf(dst, cap, "%s", line);
    sync_unlock(&r->lock);
}

/* Why the remote end did not answer: ssh's status and last words. */
static int no_answer(struct remote *r, int why, struct weir_error *err)
{
    const char *host = r->o->ssh_host;
    if (why == ETIMEDOUT) {
        held_show(r);
        return error_set(err, WEIR_EXIT_NETWORK, "ssh %s: no answer from the remote weir "
                         "within %g s", host, REMOTE_START_SECS);
    }
    if (!ssh_reap(r, 5.0)) {
        held_show(r);
        return error_sys(err, WEIR_EXIT_NETWORK, why, "ssh %s: the remote weir's channel", host);
    }
    /* the last line is only complete once the stderr thread read it all */
    if (r->err_started) {
        pthread_join(r->err_thread, NULL);
        r->err_started = false;
    }
    char last[256];
    kept_line(r, r->last_line, last, sizeof last);
    int ws = r->ssh_status;
    const char *rw = r->o->remote_weir ? r->o->remote_weir : "weir";
    r->said_why = true;   /* verdict need not say again how ssh ended */
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 255) {
        held_drop(r);
        return error_set(err, WEIR_EXIT_NETWORK, "ssh %s: %s", host,
                         last[0] ? last : "ssh failed (status 255)");
    }
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127) {
        held_show(r);
        return error_set(err, WEIR_EXIT_NETWORK, "remote: %s: command not found on %s "
                         "(install weir there, or name it with --remote-weir)", rw, host);
    }
    if (WIFEXITED(ws) && strstr(last, "--ssh-server")) {
        held_show(r);
        r->too_old = true;   /* its usage error is not the user's */
        return error_set(err, WEIR_EXIT_NETWORK, "remote: the weir on %s is too old for --ssh "
                         "(it does not know --ssh-server); this is weir %s", host,
                         WEIR_VERSION);
    }
    if (WIFEXITED(ws)) {
        held_drop(r);
        return error_set(err, WEIR_EXIT_NETWORK, "remote: the weir on %s exited with status %d "
                         "before it started%s%s", host, WEXITSTATUS(ws), last[0] ? ": " : "",
                         last);
    }
    held_show(r);
    return error_set(err, WEIR_EXIT_NETWORK, "ssh %s: killed by signal %d", host,
                     WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

/* The request (doc/stream-format.md, "The ssh channel"), and the answer. */
static const char *const path_names[] = {"auto", "tunnel", "direct"};

/* One connection on a listening socket within secs, from the address want
 * when it is given (others are closed, and the wait goes on): 0 with *fd
 * tuned for the engine, or -1 (errno ETIMEDOUT, or ECANCELED once *stop is
 * set; the start's own stop, r->halt, says which signal). */
static int accept_one(struct remote *r, struct tcp_listener *l, const char *want, double secs,
                      double io_timeout, atomic_bool *stop, int *fd, const char *name,
                      struct weir_error *err)
{
    double until = clock_now() + secs;
    for (;;) {
        int left = (int)((until - clock_now()) * 1000);
        if (left <= 0) {
            error_set(err, WEIR_EXIT_NETWORK, "%s: no connection within %g s", name, secs);
            errno = ETIMEDOUT;
            return -1;
        }
        if (atomic_load(stop)) {
            if (stop == &r->halt.halt)
                halted(r, "waiting for the data's connection", err);
            else
                error_sys(err, WEIR_EXIT_NETWORK, ECANCELED, "%s", name);
            errno = ECANCELED;
            return -1;
        }
        struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
        int p = poll(&pfd, 1, left < 100 ? left : 100);
        if (p < 0 && errno != EINTR)
            return error_sys(err, WEIR_EXIT_NETWORK, errno, "%s: poll", name);
        if (p <= 0)
            continue;
        struct sockaddr_storage ss;
        socklen_t slen = sizeof ss;
        int got = os_accept(l->fd, (struct sockaddr *)&ss, &slen);
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                continue;
            return error_sys(err, WEIR_EXIT_NETWORK, errno, "%s: accept", name);
        }
        char host[NI_MAXHOST];
        if (want && (getnameinfo((struct sockaddr *)&ss, slen, host, sizeof host, NULL, 0,
                                 NI_NUMERICHOST) != 0 || strcmp(host, want) != 0)) {
            char peer[80];
            tcp_format_addr((struct sockaddr *)&ss, peer, sizeof peer);
            log_msg(r->log, LOG_WARN, "%s: refused connection from %s: not %s", name, peer,
                    want);
            close(got);
            continue;
        }
        if (tcp_tune(got, io_timeout) != 0) {
            int e = errno;
            close(got);
            return error_sys(err, WEIR_EXIT_NETWORK, e, "%s", name);
        }
        *fd = got;
        return 0;
    }
}

/* "listen": connect to the remote weir's port, and say so on the channel.
 * When that fails, unless --ssh-direct, say so and take the tunnel
 * (*tunnel set). */
static int connect_listening(struct remote *r, bool *tunnel, struct weir_error *err)
{
    const struct weir_options *o = r->o;
    const char *host = o->ssh_host;
    /* the remote weir listens already: a refusal (a firewall that rejects)
     * is an answer, and the tunnel is taken at once */
    struct tcp_settings ts = {.family = o->family, .connect_timeout = DIRECT_SECS,
                              .refusal_final = true, .io_timeout = o->io_timeout};
    /* test-only: a port that refuses, as a firewall between the hosts would */
    const char *blocked = getenv("WEIR_TEST_SSH_DIRECT_PORT");
    if (blocked)
        snprintf(r->port, sizeof r->port, "%s", blocked);
    snprintf(r->data_name, sizeof r->data_name, strchr(r->addr, ':') ? "%s [%s]:%s (direct)"
             : "%s %s:%s (direct)", host, r->addr, r->port);
    struct weir_error cerr;
    int fd;
    if (tcp_connect(r->addr, r->port, &ts, &r->halt.halt, r->log, r->data_name, &fd, &cerr) ==
        0) {
        if (put_all(r->ctl_out, "via direct\n", 11) != 0) {
            close(fd);
            return no_answer(r, errno, err);
        }
        r->data_fd = fd;
        r->direct = true;
        return 0;
    }
    if (atomic_load(&r->halt.halt) || o->ssh_path == SSH_PATH_DIRECT) {
        (void)put_all(r->ctl_out, "via none\n", 9);
        if (atomic_load(&r->halt.halt))
            return halted(r, "making the direct connection", err);
        return error_set(err, WEIR_EXIT_NETWORK, "%s (--ssh-direct: not through ssh)",
                         cerr.msg);
    }
    log_msg(r->log, LOG_WARN, "%s; the data goes through the ssh connection instead",
            cerr.msg);
    if (put_all(r->ctl_out, "via tunnel\n", 11) != 0)
        return no_answer(r, errno, err);
    *tunnel = true;
    return 0;
}

/* "direct": take the remote weir's connection to --connect-back's port. */
static int accept_connected_back(struct remote *r, struct weir_error *err)
{
    snprintf(r->data_name, sizeof r->data_name, "%s %s (direct, connected back)",
             r->o->ssh_host, r->back.addr);
    int rc = accept_one(r, &r->back, NULL, 2 * DIRECT_SECS, r->o->io_timeout, &r->halt.halt,
                        &r->data_fd, r->data_name, err);
    if (rc == 0) {
        r->keep = r->back;   /* to be found again there */
        r->direct = true;
    } else {
        tcp_listener_close(&r->back);
    }
    r->back.fd = -1;
    return rc;
}

/* "tunnel": the data goes on the ssh channel, on a descriptor of its own. */
static int take_tunnel(struct remote *r, struct weir_error *err)
{
    const struct weir_options *o = r->o;
    const char *host = o->ssh_host;
    if (o->ssh_path == SSH_PATH_DIRECT)
        return error_set(err, WEIR_EXIT_NETWORK, "ssh %s: the remote weir could not connect "
                         "back (--ssh-direct: not through ssh)", host);
    if (o->ssh_path != SSH_PATH_TUNNEL)
        log_msg(r->log, LOG_WARN, "ssh %s: the data goes through the ssh connection (no direct "
                "connection could be made)", host);
    snprintf(r->data_name, sizeof r->data_name, "%s (through ssh)", host);
    r->tunnel = true;
    /* a descriptor of its own: the engine closes it when it is done */
    r->data_fd = fcntl(r->ctl_in, F_DUPFD_CLOEXEC, 3);
    if (r->data_fd < 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "ssh %s: dup", host);
    return 0;
}

/* The local end: make the data's connection as the remote weir's answer
 * says.  "listen": connect to it (else, unless --ssh-direct, say so and take
 * the tunnel); "direct": it connected to --connect-back's port; "tunnel":
 * the ssh channel. */
static int connect_data(struct remote *r, const char *what, struct weir_error *err)
{
    if (strcmp(what, "listen") == 0) {
        bool tunnel = false;
        if (connect_listening(r, &tunnel, err))
            return -1;
        if (!tunnel)
            return 0;
        what = "tunnel";
    }
    if (strcmp(what, "direct") == 0 && r->back.fd >= 0)
        return accept_connected_back(r, err);
    if (strcmp(what, "tunnel") != 0)
        return error_set(err, WEIR_EXIT_NETWORK, "remote: the weir on %s answered '%s', which "
                         "this weir does not know", r->o->ssh_host, what);
    return take_tunnel(r, err);
}

/* Send the request: the mode, the path, the one-time key, the options for
 * the remote weir and the command. */
static int send_request(struct remote *r, int port, struct weir_error *err)
{
    const struct weir_options *o = r->o;
    size_t cap = REMOTE_REQUEST_MAX;
    char *req = secret_alloc(cap);   /* it holds the key */
    if (!req)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "ssh %s: request", o->ssh_host);
    size_t n = (size_t)snprintf(req, cap, "weir-ssh %d %s\nmode %s\npath %s\nport %d\n"
                                "key %.*s", REMOTE_PROTOCOL, WEIR_VERSION,
                                o->pull ? "pull" : "push", path_names[o->ssh_path], port,
                                r->key_len, r->key);
    /* what shapes the sending side goes to whichever end sends */
    char word[64];
    if (o->pull) {
        if (o->adapt)
            n += (size_t)snprintf(req + n, cap - n, "opt --adapt=%d:%d\n", o->adapt_min,
                                  o->adapt_max);
        else if (o->zstd)
            n += (size_t)snprintf(req + n, cap - n, "opt --zstd=%d\n",
                                  o->zstd_level ? o->zstd_level : OPTIONS_ZSTD_LEVEL);
        else if (o->compress)
            n += (size_t)snprintf(req + n, cap - n, "opt --compress=%d\n", o->level);
        n += (size_t)snprintf(req + n, cap - n, "opt -T%d\n", o->threads);
        if (o->read_rate)
            n += (size_t)snprintf(req + n, cap - n, "opt -r%llu\n",
                                  (unsigned long long)o->read_rate);
    }
    /* both ends wait the same for a broken connection to come back */
    n += (size_t)snprintf(req + n, cap - n, "opt --reconnect=%g\n", o->reconnect);
    if (o->quiet)
        n += (size_t)snprintf(req + n, cap - n, "opt -q\n");
    for (int v = 0; v < o->verbosity && n < cap; v++)
        n += (size_t)snprintf(req + n, cap - n, "opt -v\n");
    int words = 0;
    for (const char *s = o->remote_opts ? o->remote_opts : ""; *s;) {
        s += strspn(s, " \t");
        size_t wl = strcspn(s, " \t");
        if (wl == 0)
            break;
        if (wl >= sizeof word || ++words > REMOTE_ARGS_MAX / 2) {
            secret_free(req, cap);
            return error_set(err, WEIR_EXIT_USAGE, "--remote-opts: too many or too long words");
        }
        n += (size_t)snprintf(req + n, cap - n, "opt %.*s\n", (int)wl, s);
        s += wl;
    }
    size_t clen = strlen(o->remote_cmd);
    if (n + clen + 64 > cap) {
        secret_free(req, cap);
        return error_set(err, WEIR_EXIT_USAGE, "--remote: the command is too long");
    }
    n += (size_t)snprintf(req + n, cap - n, "cmd %zu\n%s\ngo\n", clen, o->remote_cmd);
    int rc = put_all(r->ctl_out, req, n);
    int e = errno;
    secret_free(req, cap);
    if (rc != 0)
        return no_answer(r, e, err);
    return 0;
}

/* The remote weir's answer line, or why there is none (a signal, ssh's
 * end, or the remote weir's refusal). */
static int read_answer(struct remote *r, char *line, size_t cap, struct weir_error *err)
{
    struct reader rd = {.fd = r->ctl_in, .deadline = clock_now() + REMOTE_START_SECS,
                        .halt = &r->halt.halt};
    long got = get_line(&rd, line, cap);
    if (got < 0 && errno == ECANCELED) {
        char what[300];
        snprintf(what, sizeof what, "ssh %s started the other end", r->o->ssh_host);
        return halted(r, what, err);
    }
    if (got < 0)
        return no_answer(r, errno, err);
    if (strncmp(line, "refused ", 8) == 0) {
        int code = WEIR_EXIT_NETWORK;
        int used = 0;
        if (sscanf(line + 8, "%d %n", &code, &used) < 1 || code <= 0 || code > 255)
            code = WEIR_EXIT_NETWORK;
        return error_set(err, code, "remote: %s", line + 8 + used);
    }
    return 0;
}

/* The local end's conversation: the request, the remote weir's answer,
 * then the data's connection as it says. */
static int handshake(struct remote *r, int port, struct weir_error *err)
{
    const struct weir_options *o = r->o;
    if (send_request(r, port, err))
        return -1;
    char line[1024];
    if (read_answer(r, line, sizeof line, err))
        return -1;
    int proto = 0, cport = 0;
    char version[32] = "", what[16] = "", addr[80] = "";
    if (sscanf(line, "ready %d %31s", &proto, version) == 2 && proto != REMOTE_PROTOCOL)
        return error_set(err, WEIR_EXIT_NETWORK, "remote: weir %s on %s speaks --ssh protocol "
                         "%d; this weir %s speaks %d", version, o->ssh_host, proto,
                         WEIR_VERSION, REMOTE_PROTOCOL);
    if (sscanf(line, "ready %d %31s %15s %79s %d", &proto, version, what, addr, &cport) != 5)
        return error_set(err, WEIR_EXIT_NETWORK, "remote: the weir on %s answered '%.80s', "
                         "not ready", o->ssh_host, line);
    if (proto != REMOTE_PROTOCOL)
        return error_set(err, WEIR_EXIT_NETWORK, "remote: weir %s on %s speaks --ssh protocol "
                         "%d; this weir %s speaks %d", version, o->ssh_host, proto,
                         WEIR_VERSION, REMOTE_PROTOCOL);
    snprintf(r->remote_version, sizeof r->remote_version, "%s", version);
    snprintf(r->addr, sizeof r->addr, "%s", addr);
    snprintf(r->port, sizeof r->port, "%d", cport);
    if (cport > 0 && strcmp(addr, "-") != 0) {
        /* should the data go through ssh, a new session can reach the
         * remote weir here, from its host, after a break */
        snprintf(r->rejoin_addr, sizeof r->rejoin_addr, "%s", addr);
        snprintf(r->rejoin_port, sizeof r->rejoin_port, "%d", cport);
    }
    held_show(r);   /* whatever ssh said before, a warning say */
    sync_lock(&r->lock);
    r->ready = true;
    sync_unlock(&r->lock);
    if (strcmp(what, "listen") == 0)
        log_msg(r->log, LOG_INFO, "ssh %s: weir %s answered; it listens on %s%s%s:%s",
                o->ssh_host, version, strchr(addr, ':') ? "[" : "", addr,
                strchr(addr, ':') ? "]" : "", r->port);
    else
        log_msg(r->log, LOG_INFO, "ssh %s: weir %s answered", o->ssh_host, version);
    return connect_data(r, what, err);
}

/* The ssh session that carried a tunnel's transfer is over: stopped if it
 * still runs, reaped, and its standard error read to the end. */
static void end_ssh(struct remote *r)
{
    if (!r->ssh_reaped && r->ssh_pid > 0 && !ssh_reap(r, 0)) {
        kill(r->ssh_pid, SIGTERM);
        if (!ssh_reap(r, 2.0)) {
            kill(r->ssh_pid, SIGKILL);
            ssh_reap(r, 2.0);
        }
    }
    atomic_store(&r->err_stop, true);
    if (r->err_started)
        pthread_join(r->err_thread, NULL);
    r->err_started = false;
    atomic_store(&r->err_stop, false);
    if (r->ctl_in >= 0)
        close(r->ctl_in);
    r->ctl_in = r->ctl_out = -1;
    if (r->err_fd >= 0)
        close(r->err_fd);
    r->err_fd = -1;
}

/* A push through ssh that broke (weir.h, redial): a new ssh session, whose
 * weir --ssh-server connects to the port the remote weir keeps for it and
 * relays; the engine then resumes through it as through any connection. */
static int tunnel_redial(void *ctx, double timeout, atomic_bool *stop, int *fd,
                         struct weir_error *err)
{
    struct remote *r = ctx;
    const char *host = r->o->ssh_host;
    end_ssh(r);
    if (spawn_ssh(r, false, err)) {
        errno = EAGAIN;
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "weir-ssh %d %s\nrejoin %s %s\ngo\n", REMOTE_PROTOCOL,
                     WEIR_VERSION, r->rejoin_addr, r->rejoin_port);
    struct reader rd = {.fd = r->ctl_in, .deadline = clock_now() + timeout, .halt = stop};
    char line[600];
    if (put_all(r->ctl_out, req, (size_t)n) != 0 || get_line(&rd, line, sizeof line) < 0) {
        int e = errno;
        if (e != ECANCELED)
            error_set(err, WEIR_EXIT_NETWORK, "ssh %s: a new ssh session: %s", host,
                      e == EPIPE ? "it ended before it answered" : strerror(e));
        errno = e == ECANCELED ? ECANCELED : EAGAIN;
        return -1;
    }
    if (strncmp(line, "refused ", 8) == 0) {
        int used = 0, code;
        if (sscanf(line + 8, "%d %n", &code, &used) < 1)
            used = 0;
        error_set(err, WEIR_EXIT_NETWORK, "remote: %s", line + 8 + used);
        /* nothing listens where the remote weir waited: it is gone */
        errno = strstr(line, "Connection refused") ? ECONNREFUSED : EAGAIN;
        return -1;
    }
    if (strncmp(line, "ready ", 6) != 0) {
        error_set(err, WEIR_EXIT_NETWORK, "ssh %s: a new ssh session answered '%.80s'", host,
                  line);
        errno = EPROTO;
        return -1;
    }
    *fd = fcntl(r->ctl_in, F_DUPFD_CLOEXEC, 3);
    if (*fd < 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "ssh %s: dup", host);
    log_msg(r->log, LOG_INFO, "ssh %s: a new ssh session carries the transfer", host);
    return 0;
}

/* An end that dialled its data connection directly: dial the same address
 * again (weir.h, redial and input_redial). */
static int redial_again(void *ctx, double timeout, atomic_bool *stop, int *fd,
                        struct weir_error *err)
{
    struct remote *r = ctx;
    double io = r->server ? 600 : r->o->io_timeout;
    if (tcp_connect_addr((struct sockaddr *)&r->again, r->again_len, timeout, io, stop, fd) ==
        0)
        return 0;
    int e = errno;
    error_sys(err, WEIR_EXIT_NETWORK, e, "%s: connect", r->data_name);
    errno = e;
    return -1;
}

/* An end that accepted its data connection: accept the other end's return
 * on the same listening socket, from the host it came from (keep_host;
 * "" for any: the key or the session's token proves it), within timeout. */
static int accept_again(void *ctx, double timeout, atomic_bool *stop, int *fd,
                        struct weir_error *err)
{
    struct remote *r = ctx;
    return accept_one(r, &r->keep, r->keep_host[0] ? r->keep_host : NULL, timeout,
                      r->server ? 600 : r->o->io_timeout, stop, fd, r->keep.addr, err);
}

/* A remote with nothing open yet, or NULL without memory. */
static struct remote *remote_alloc(struct weir_log *log)
{
    struct remote *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->log = log;
    r->ctl_in = r->ctl_out = r->err_fd = r->data_fd = -1;
    r->wake[0] = r->wake[1] = r->relay[0] = r->relay[1] = -1;
    r->back.fd = r->keep.fd = -1;
    atomic_init(&r->err_stop, false);
    atomic_init(&r->halt.halt, false);
    atomic_init(&r->halt.running, false);
    atomic_init(&r->halt.sig, 0);
    sync_mutex_init(&r->lock);
    return r;
}

int remote_local_new(struct remote **out, const struct weir_options *o, struct weir_log *log,
                     struct weir_error *err)
{
    /* non-dumpable before any secret exists: the one-time key, the
     * session's token, the handshakes' state */
    if (secret_protect() != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "ssh %s: keeping secrets out of core dumps",
                         o->ssh_host);
    struct remote *r = remote_alloc(log);
    if (!r)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "ssh %s", o->ssh_host);
    r->o = o;
    if (os_pipe(r->wake) != 0) {
        int e = errno;
        remote_free(r);
        return error_sys(err, WEIR_EXIT_INTERNAL, e, "ssh %s: pipe", o->ssh_host);
    }
    r->key = secret_alloc(KEY_TEXT_MAX);
    r->key_len = r->key ? keyfile_new_text(r->key, KEY_TEXT_MAX, KEY_NAME) : -1;
    if (r->key_len < 0) {
        remote_free(r);
        return error_set(err, WEIR_EXIT_INTERNAL, "ssh %s: no one-time key (no memory or "
                         "no random bytes)", o->ssh_host);
    }
    *out = r;
    return 0;
}

/* ---- the server: weir --ssh-server ------------------------------------------ */

/* SSH_CONNECTION is "client-ip client-port server-ip server-port". */
static int ssh_connection(struct remote *r, struct weir_error *err)
{
    const char *sc = getenv("SSH_CONNECTION");
    char cport[16], sport[16];
    if (!sc || sscanf(sc, "%63s %15s %63s %15s", r->peer, cport, r->self, sport) != 4)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: SSH_CONNECTION is not set: "
                         "it is how weir --ssh starts the other end, under ssh");
    return 0;
}


bool remote_refuse(struct remote *r, int status, const char *msg)
{
    if (!r || !r->server || r->ctl_out < 0)
        return false;
    char line[600];
    int n = snprintf(line, sizeof line, "refused %d %s\n", status, msg);
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    line[len - 1] = '\n';
    r->refused = n > 0 && put_all(r->ctl_out, line, len) == 0;
    return r->refused;
}

bool remote_refused(const struct remote *r)
{
    return r && r->refused;
}

bool remote_rejoining(const struct remote *r)
{
    return r && r->rejoin;
}

int remote_relay(struct remote *r)
{
    /* nothing here to stop cleanly: a signal ends the relay as it ends any
     * process (the threads inherit this mask) */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    r->relay[1] = r->data_fd;
    r->data_fd = -1;
    struct weir_error err;
    if (sync_create(&r->relay_in, relay_in_main, r, &err) == 0)
        r->relay_in_started = true;
    if (r->relay_in_started && sync_create(&r->relay_out, relay_out_main, r, &err) == 0)
        r->relay_out_started = true;
    if (!r->relay_out_started) {
        log_msg(r->log, LOG_ERROR, "%s", err.msg);
        return WEIR_EXIT_INTERNAL;
    }
    /* each way ends by itself: a sender half-closes after its trailer and
     * still reads the answer, a receiver closes after its answer and the
     * sender then closes its side; an ssh session that ends ends both */
    pthread_join(r->relay_out, NULL);
    r->relay_out_started = false;
    pthread_join(r->relay_in, NULL);
    r->relay_in_started = false;
    return WEIR_EXIT_OK;
}

/* What read_request gathers as it reads the request's lines. */
struct request_read {
    char *p, *end;       /* where the next option or the command goes in r->request */
    int argc, port;
    bool have_mode;
    const char *cmd;
};

/* "path auto|tunnel|direct". */
static int request_path(struct remote *r, const char *line, struct weir_error *err)
{
    r->path = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(line + 5, path_names[i]) == 0)
            r->path = i;
    if (r->path < 0)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: unknown path '%s'",
                         line + 5);
    return 0;
}

/* "key LINE": the one-time key, into secret memory. */
static int request_key(struct remote *r, const char *line, long len, struct weir_error *err)
{
    if (r->key)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: two keys");
    r->key = secret_alloc(KEY_TEXT_MAX);
    if (!r->key || (size_t)len - 4 + 2 > KEY_TEXT_MAX)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: bad key line");
    memcpy(r->key, line + 4, (size_t)len - 4);
    r->key[len - 4] = '\n';
    r->key_len = (int)len - 3;
    return 0;
}

/* "opt WORD": one more argument for the remote weir's options. */
static int request_opt(struct remote *r, const char *line, long len, struct request_read *q,
                       struct weir_error *err)
{
    if (q->argc >= REMOTE_ARGS_MAX || q->p + len - 3 > q->end)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: too many options");
    memcpy(q->p, line + 4, (size_t)len - 3);
    r->argv[q->argc++] = q->p;
    q->p += len - 3;
    return 0;
}

/* "cmd LENGTH", then the command's bytes and a newline. */
static int request_cmd(struct reader *rd, char *line, size_t cap, struct request_read *q,
                       struct weir_error *err)
{
    char *stop;
    unsigned long clen = strtoul(line + 4, &stop, 10);
    if (*stop || clen == 0 || q->p + clen + 1 > q->end)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: bad command length");
    for (unsigned long i = 0; i < clen; i++) {
        int got = get_byte(rd, q->p + i);
        if (got <= 0)
            return error_set(err, WEIR_EXIT_NETWORK, "--ssh-server: the request "
                             "ended inside the command");
    }
    q->p[clen] = '\0';
    q->cmd = q->p;
    q->p += clen + 1;
    if (get_line(rd, line, cap) != 0)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: bad command");
    return 0;
}

/* One line of the request (of len bytes, in line's cap), before "go". */
static int request_line(struct remote *r, struct reader *rd, char *line, size_t cap, long len,
                        struct request_read *q, struct weir_error *err)
{
    if (strncmp(line, "rejoin ", 7) == 0) {
        /* a tunnel's transfer comes back through this new session */
        if (sscanf(line + 7, "%79s %15s", r->rejoin_addr, r->rejoin_port) != 2)
            return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: bad rejoin line");
        r->rejoin = true;
    } else if (strcmp(line, "mode push") == 0 || strcmp(line, "mode pull") == 0) {
        r->push = line[5] == 'p' && line[6] == 'u' && line[7] == 's';
        q->have_mode = true;
    } else if (strncmp(line, "port ", 5) == 0) {
        q->port = atoi(line + 5);
    } else if (strncmp(line, "path ", 5) == 0) {
        return request_path(r, line, err);
    } else if (strncmp(line, "key ", 4) == 0) {
        return request_key(r, line, len, err);
    } else if (strncmp(line, "opt ", 4) == 0) {
        return request_opt(r, line, len, q, err);
    } else if (strncmp(line, "cmd ", 4) == 0) {
        return request_cmd(rd, line, cap, q, err);
    } else {
        OPENSSL_cleanse(line, cap);
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: unknown request line");
    }
    return 0;
}

/* The engine's arguments after the request's options: which way the data
 * flows, and the command.  Returns their count. */
static int request_argv(struct remote *r, struct request_read *q)
{
    int argc = q->argc;
    /* the connection itself is made before the engine starts
     * (remote_configure hands it over); these say which way data flows */
    if (r->push) {
        r->argv[argc++] = "-I";
        r->argv[argc++] = "0";
    } else {
        r->argv[argc++] = "-O";
        r->argv[argc++] = "ssh:1";   /* a placeholder: the connection is made */
    }
    r->argv[argc++] = "--";
    r->argv[argc++] = "/bin/sh";
    r->argv[argc++] = "-c";
    r->argv[argc++] = (char *)q->cmd;
    r->argv[argc] = NULL;
    return argc;
}

/* Read the request: its lines into argv (opt), the key (secret memory) and
 * the command. */
static int read_request(struct remote *r, struct weir_error *err)
{
    struct reader rd = {.fd = r->ctl_in, .deadline = clock_now() + REQUEST_SECS,
                        .halt = &r->halt.halt};
    r->request = secret_alloc(REMOTE_REQUEST_MAX);
    if (!r->request)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "--ssh-server: request");
    struct request_read q = {.p = r->request, .end = r->request + REMOTE_REQUEST_MAX,
                             .argc = 0, .port = -1, .have_mode = false, .cmd = NULL};
    char line[1024];
    r->argv[q.argc++] = "weir";
    if (get_line(&rd, line, sizeof line) < 0)
        return errno == ECANCELED ? halted(r, "reading the request", err)
                                  : error_sys(err, WEIR_EXIT_NETWORK, errno,
                                              "--ssh-server: the request");
    int proto = 0;
    if (sscanf(line, "weir-ssh %d", &proto) != 1)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: not a weir --ssh request");
    if (proto != REMOTE_PROTOCOL)
        return error_set(err, WEIR_EXIT_NETWORK, "weir %s speaks --ssh protocol %d, the local weir "
                         "speaks %d: use the same version on both hosts", WEIR_VERSION,
                         REMOTE_PROTOCOL, proto);
    for (;;) {
        long len = get_line(&rd, line, sizeof line);
        if (len < 0)
            return errno == ECANCELED ? halted(r, "reading the request", err)
                                  : error_sys(err, WEIR_EXIT_NETWORK, errno,
                                              "--ssh-server: the request");
        if (strcmp(line, "go") == 0)
            break;
        if (request_line(r, &rd, line, sizeof line, len, &q, err))
            return -1;
    }
    OPENSSL_cleanse(line, sizeof line);
    if (r->rejoin)
        return 0;
    if (!q.have_mode || !q.cmd || !r->key || q.port < 0 || q.port > 65535)
        return error_set(err, WEIR_EXIT_USAGE, "--ssh-server: incomplete request");
    r->back_port = q.port;
    return request_argv(r, &q);
}

/* Move bytes from one descriptor to the other until the end (spliced when
 * one of them is a pipe, as sshd's are, else copied).  stoppable: the wake
 * pipe ends it too. */
static void relay(struct remote *r, int from, int to, bool stoppable)
{
    char *buf = NULL;
    bool copy = false;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = from, .events = POLLIN},
                                {.fd = stoppable ? r->wake[0] : -1, .events = POLLIN}};
        int p = poll(pfd, 2, -1);
        if (p < 0 && errno == EINTR)
            continue;
        if (p < 0 || pfd[1].revents)
            break;
        ssize_t n = -1;
        if (!copy) {
            n = os_splice(from, to, RELAY_CHUNK);
            copy = n < 0 && (errno == EINVAL || errno == ENOSYS);   /* neither is a pipe */
        }
        if (copy) {
            if (!buf && !(buf = malloc(RELAY_CHUNK)))
                break;
            n = read(from, buf, RELAY_CHUNK);
            if (n > 0 && put_all(to, buf, (size_t)n) != 0)
                break;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;   /* the end, or the other side is gone: the stream says which */
    }
    free(buf);
}

/* ssh's standard input into the engine; its end is the stream's end. */
static void *relay_in_main(void *arg)
{
    struct remote *r = arg;
    relay(r, r->ctl_in, r->relay[1], true);
    (void)shutdown(r->relay[1], SHUT_WR);
    return NULL;
}

/* What the engine sends back, to ssh's standard output, to the end: the
 * answer is the last of it, so this one is never cut short. */
static void *relay_out_main(void *arg)
{
    struct remote *r = arg;
    relay(r, r->relay[1], r->ctl_out, false);
    /* the engine's end of the stream: ssh passes it on as the end of the
     * session's output, and the local weir sees its input end (sshd may
     * give a session one socket for both, which only shutdown() ends) */
    if (shutdown(r->ctl_out, SHUT_WR) != 0) {
        close(r->ctl_out);
        r->ctl_out = -1;
    }
    return NULL;
}

/* --connect-back: connect to the local weir's port (*what "direct"); when
 * that fails, unless --ssh-direct, say so, and the data takes the tunnel. */
static int connect_back(struct remote *r, const struct tcp_settings *ts, const char **what,
                        struct weir_error *err)
{
    char port[16];
    snprintf(port, sizeof port, "%d", r->back_port);
    /* test-only: connect back through a port that cuts the connection */
    const char *via = getenv("WEIR_TEST_SSH_BACK_PORT");
    if (via)
        snprintf(port, sizeof port, "%s", via);
    snprintf(r->data_name, sizeof r->data_name, strchr(r->peer, ':')
             ? "the local weir [%s]:%s (connected back)" : "the local weir %s:%s "
             "(connected back)", r->peer, port);
    struct weir_error cerr;
    if (tcp_connect(r->peer, port, ts, &r->halt.halt, r->log, r->data_name, &r->data_fd,
                    &cerr) == 0) {
        *what = "direct";
    } else if (atomic_load(&r->halt.halt)) {
        return halted(r, "connecting back", err);
    } else if (r->path == SSH_PATH_DIRECT) {
        *err = cerr;
        remote_refuse(r, err->status, err->msg);
        return -1;
    } else {
        log_msg(r->log, LOG_WARN, "%s; the data goes through the ssh connection instead",
                cerr.msg);
    }
    return 0;
}

/* Through ssh: a port on this host's loopback (*lo), where a new ssh
 * session brings the local weir back after a break; without it a break
 * cannot be resumed. */
static void rejoin_listener(struct remote *r, struct tcp_listener *lo)
{
    struct tcp_settings ls = {.family = AF_INET, .bind_addr = "127.0.0.1"};
    snprintf(ls.listen_port, sizeof ls.listen_port, "0");
    struct weir_error lerr;
    if (tcp_listen(&ls, lo, &lerr) != 0)
        log_msg(r->log, LOG_WARN, "%s: a break of this transfer cannot be resumed", lerr.msg);
}

/* Say how the data goes: "ready PROTOCOL VERSION WHAT ADDR PORT", with the
 * address and port of l, else of lo, else none. */
static int say_ready(struct remote *r, const char *what, struct tcp_listener *l,
                     struct tcp_listener *lo, struct weir_error *err)
{
    const struct tcp_listener *told = l->fd >= 0 ? l : lo;
    const char *colon = told->fd >= 0 ? strrchr(told->addr, ':') : NULL;
    char line[300];
    int n = snprintf(line, sizeof line, "ready %d %s %s %s %d\n", REMOTE_PROTOCOL,
                     WEIR_VERSION, what, l->fd >= 0 ? r->self : lo->fd >= 0 ? "127.0.0.1" : "-",
                     colon ? atoi(colon + 1) : 0);
    if (put_all(r->ctl_out, line, (size_t)n) != 0) {
        tcp_listener_close(l);
        tcp_listener_close(lo);
        return error_sys(err, WEIR_EXIT_NETWORK, errno, "--ssh-server: the ssh channel");
    }
    return 0;
}

/* "listen": the local weir says how it goes on.  "via direct": its
 * connection on l, from the address ssh came from (*direct set); "via
 * tunnel": through ssh, and l is kept for a new session to come back to. */
static int await_local(struct remote *r, struct tcp_listener *l, bool *direct,
                       struct weir_error *err)
{
    char line[300];
    struct reader rd = {.fd = r->ctl_in, .deadline = clock_now() + REQUEST_SECS,
                        .halt = &r->halt.halt};
    long len = get_line(&rd, line, sizeof line);
    if (len >= 0 && strcmp(line, "via direct") == 0) {
        *direct = true;
        snprintf(r->data_name, sizeof r->data_name, "the local weir %s (direct)", r->peer);
        int rc = accept_one(r, l, r->peer, 2 * DIRECT_SECS, 600, &r->halt.halt, &r->data_fd,
                            r->data_name, err);
        if (rc == 0) {
            r->keep = *l;   /* to be found again there */
            snprintf(r->keep_host, sizeof r->keep_host, "%s", r->peer);
        } else {
            tcp_listener_close(l);
        }
        return rc;
    }
    if (len >= 0 && strcmp(line, "via tunnel") == 0) {
        /* the data comes through ssh: a new session may come back here */
        r->keep = *l;
        snprintf(r->keep_host, sizeof r->keep_host, "%s", r->self);
    } else {
        tcp_listener_close(l);
    }
    if (len < 0 && errno == ECANCELED)
        return halted(r, "waiting for the local weir's connection", err);
    if (len < 0 || strcmp(line, "via tunnel") != 0)
        return error_set(err, WEIR_EXIT_NETWORK, "--ssh-server: the local weir made no "
                         "connection (it said '%.40s')", len < 0 ? "nothing" : line);
    return 0;
}

/* The tunnel: the engine's end of a socket pair, relayed to and from the
 * ssh session's standard input and output. */
static int start_relay(struct remote *r, struct weir_error *err)
{
    r->tunnel = true;
    snprintf(r->data_name, sizeof r->data_name, "the local weir (through ssh)");
    if (os_socketpair(r->relay) != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "--ssh-server: socketpair");
    r->data_fd = r->relay[0];   /* the engine's, once configured */
    r->relay[0] = -1;
    if (sync_create(&r->relay_in, relay_in_main, r, err))
        return -1;
    r->relay_in_started = true;
    if (sync_create(&r->relay_out, relay_out_main, r, err))
        return -1;
    r->relay_out_started = true;
    return 0;
}

/* The server: make the data's connection before the engine starts, and say
 * how ("ready PROTOCOL VERSION listen|direct|tunnel ADDR PORT"): connect
 * back to the local weir's port, or listen on the address ssh reached and
 * take the local weir's connection (from the address ssh came from only),
 * or carry the data on the ssh session itself. */
static int server_data(struct remote *r, struct weir_error *err)
{
    const char *what = "tunnel";
    struct tcp_listener l;
    memset(&l, 0, sizeof l);
    l.fd = -1;
    /* the local weir listens already (--connect-back): a refusal is final */
    struct tcp_settings ts = {.family = AF_UNSPEC, .connect_timeout = DIRECT_SECS,
                              .refusal_final = true, .io_timeout = 600};
    if (r->back_port > 0) {
        if (connect_back(r, &ts, &what, err))
            return -1;
    } else if (r->path != SSH_PATH_TUNNEL) {
        ts.bind_addr = r->self;
        snprintf(ts.listen_port, sizeof ts.listen_port, "0");
        if (tcp_listen(&ts, &l, err)) {
            remote_refuse(r, err->status, err->msg);
            return -1;
        }
        what = "listen";
    }
    /* through ssh: a port on this host's loopback, where a new ssh session
     * brings the local weir back after a break (its ADDR and PORT in the
     * answer) */
    struct tcp_listener lo;
    memset(&lo, 0, sizeof lo);
    lo.fd = -1;
    if (strcmp(what, "tunnel") == 0)
        rejoin_listener(r, &lo);
    if (say_ready(r, what, &l, &lo, err))
        return -1;
    if (lo.fd >= 0) {
        r->keep = lo;
        snprintf(r->keep_host, sizeof r->keep_host, "127.0.0.1");
    }
    if (l.fd >= 0) {
        bool direct = false;
        int rc = await_local(r, &l, &direct, err);
        if (rc != 0 || direct)
            return rc;
    }
    if (strcmp(what, "direct") == 0)
        return 0;
    return start_relay(r, err);
}

static int serve_start(struct remote *r, struct weir_options *o, struct weir_error *err);

int remote_server_new(struct remote **out, struct weir_log *log, struct weir_options *o,
                      struct weir_error *err)
{
    /* non-dumpable before the request (it holds the key) arrives */
    if (secret_protect() != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "--ssh-server: keeping secrets out of core dumps");
    struct remote *r = remote_alloc(log);
    if (!r)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "--ssh-server");
    r->server = true;
    *out = r;
    /* the channel moves aside: the commands this weir runs get /dev/null
     * for input, and their output goes to standard error, which ssh
     * carries to the local weir */
    r->ctl_in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    r->ctl_out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (r->ctl_in < 0 || r->ctl_out < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 ||
        dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        int e = errno;
        if (null >= 0)
            close(null);
        return error_sys(err, WEIR_EXIT_INTERNAL, e, "--ssh-server: standard descriptors");
    }
    close(null);
    if (os_pipe(r->wake) != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "--ssh-server: pipe");
    if (sync_stop_watch_start(&r->halt, err))
        return -1;
    int rc = serve_start(r, o, err);
    sync_stop_watch_end(&r->halt);
    return rc;
}

/* The server's start: the request, the options, the data's connection. */
static int serve_start(struct remote *r, struct weir_options *o, struct weir_error *err)
{
    int n;
    if (ssh_connection(r, err) || (n = read_request(r, err)) < 0) {
        remote_refuse(r, err->status, err->msg);
        return -1;
    }
    if (r->rejoin) {
        /* connect to the remote weir's port on this host, for remote_relay */
        struct tcp_settings ts = {.family = AF_UNSPEC, .connect_timeout = DIRECT_SECS,
                                  .io_timeout = 600};
        snprintf(r->data_name, sizeof r->data_name, "the transfer's weir at %s:%s",
                 r->rejoin_addr, r->rejoin_port);
        if (tcp_connect(r->rejoin_addr, r->rejoin_port, &ts, &r->halt.halt, r->log, r->data_name,
                        &r->data_fd, err)) {
            remote_refuse(r, err->status, err->msg);
            return -1;
        }
        char line[200];
        int len = snprintf(line, sizeof line, "ready %d %s rejoin - 0\n", REMOTE_PROTOCOL,
                           WEIR_VERSION);
        if (put_all(r->ctl_out, line, (size_t)len) != 0)
            return error_sys(err, WEIR_EXIT_NETWORK, errno, "--ssh-server: the ssh channel");
        return 0;
    }
    if (options_parse(n, r->argv, o, err)) {
        remote_refuse(r, err->status, err->msg);
        return -1;
    }
    /* what the two weirs settle between themselves is not the user's to set
     * here: said, not silently ignored (or, for --raw, a stream that cannot
     * be verified) */
    const char *theirs = o->raw ? "--raw" : o->key_file ? "--key-file" : o->decode ? "-d"
                       : o->genkey ? "--genkey" : o->link_test ? "--link-test" : NULL;
    if (theirs) {
        error_set(err, WEIR_EXIT_USAGE, "--remote-opts: %s has no place there: the two weirs "
                  "of --ssh make their own connection, key and stream", theirs);
        remote_refuse(r, err->status, err->msg);
        return -1;
    }
    /* -l through --remote-opts: the record that outlives the ssh session */
    if (o->log_path && !r->log->file && log_open_file(r->log, o->log_path)) {
        error_sys(err, WEIR_EXIT_USAGE, errno, "log %s: open", o->log_path);
        remote_refuse(r, err->status, err->msg);
        return -1;
    }
    /* the standard descriptors are not this transfer's */
    o->stdin_closed = o->stdout_closed = true;
    return server_data(r, err);
}

/* ---- both ------------------------------------------------------------------ */

/* Wait up to ms for the wake pipe: true when woken (the engine is done). */
static bool woken(struct remote *r, int ms)
{
    struct pollfd pfd = {.fd = r->wake[0], .events = POLLIN};
    int p;
    while ((p = poll(&pfd, 1, ms)) < 0 && errno == EINTR)
        ;
    return p > 0;
}

/* Whether the transfer needs its ssh session no more: the data connection
 * can be resumed, or the whole stream crossed it already (the answer comes
 * on it too).  With --reconnect 0 the session's end fails the transfer, as
 * a break of its connection does. */
static bool carries_on(struct remote *r)
{
    return weir_resumable(r->engine) || (r->reconnect > 0 && weir_stream_whole(r->engine));
}

/* The server, with a direct connection: the end of the ssh channel means
 * the local weir is gone, and the transfer stops at once. */
static void *watch_main(void *arg)
{
    struct remote *r = arg;
    bool told = false;   /* the local weir said it is going (remote_finish) */
    for (;;) {
        struct pollfd pfd[2] = {{.fd = r->ctl_in, .events = POLLIN},
                                {.fd = r->wake[0], .events = POLLIN}};
        int p = poll(pfd, 2, -1);
        if (p < 0 && errno == EINTR)
            continue;
        if (p > 0 && pfd[1].revents)
            return NULL;
        char buf[256];
        ssize_t n = p < 0 ? -1 : read(r->ctl_in, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        told = true;
    }
    if (!told && carries_on(r)) {
        /* the ssh connection dropped, not the local weir: the transfer goes
         * on (its end, and its answer, travel on the data connection), and
         * a broken data connection is waited for as any other */
        log_msg(r->log, LOG_WARN, "the ssh session ended without the local weir saying it "
                "stopped: the transfer goes on, and waits for it up to --reconnect");
        return NULL;
    }
    weir_fail(r->engine, WEIR_EXIT_NETWORK, told ? "the ssh session ended: the local weir "
              "stopped" : "the ssh session ended (its connection dropped, or the local weir is "
              "gone)");
    return NULL;
}

/* The local end: ssh's end, while the engine runs (the channel itself may
 * be the data's, so it is not read here).  After a success that is the
 * remote weir's normal end, and the engine finishes by itself; after a
 * failure the engine is given a moment to learn the better reason from the
 * stream, and is then stopped (a remote end that failed before it connected
 * would leave this one waiting). */
static void *local_watch_main(void *arg)
{
    struct remote *r = arg;
    siginfo_t si;
    for (;;) {
        memset(&si, 0, sizeof si);
        sync_lock(&r->lock);
        pid_t pid = r->ssh_pid;   /* a tunnel that came back has a new one */
        sync_unlock(&r->lock);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
            break;
        if (woken(r, 100))
            return NULL;
    }
    if (si.si_code == CLD_EXITED && si.si_status == 0)
        return NULL;
    bool dropped = (si.si_code == CLD_EXITED && si.si_status == 255) ||
                   si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED;
    if (dropped && carries_on(r)) {
        /* ssh itself ended, not the remote weir: the data's connection
         * carries on, and is resumed if it breaks */
        r->ssh_lost = true;
        log_msg(r->log, LOG_WARN, "ssh %s: the ssh connection ended (%s %d); %s",
                r->o->ssh_host, si.si_code == CLD_EXITED ? "status" : "signal", si.si_status,
                r->tunnel ? "the transfer resumes through a new ssh session"
                          : "the transfer goes on over its direct connection, without the "
                            "remote end's messages");
        return NULL;
    }
    if (woken(r, REMOTE_SETTLE_MS))
        return NULL;
    char msg[200];
    int status = WEIR_EXIT_NETWORK;
    if (si.si_code == CLD_EXITED && si.si_status == 255)
        snprintf(msg, sizeof msg, "ssh %s: the ssh connection ended before the transfer did",
                 r->o->ssh_host);
    else if (si.si_code == CLD_EXITED) {
        snprintf(msg, sizeof msg, "remote: the weir on %s exited with status %d before the "
                 "transfer was done", r->o->ssh_host, si.si_status);
        if (si.si_status >= WEIR_EXIT_INTERNAL && si.si_status <= WEIR_EXIT_INTEGRITY)
            status = si.si_status;
    } else
        snprintf(msg, sizeof msg, "ssh %s: killed by signal %d before the transfer was done",
                 r->o->ssh_host, si.si_status);
    weir_fail(r->engine, status, msg);
    return NULL;
}

static int watch(struct remote *r, struct weir_engine *e, struct weir_error *err)
{
    r->engine = e;
    if (sync_create(&r->watch_thread, r->server ? watch_main : local_watch_main, r, err))
        return -1;
    r->watch_started = true;
    return 0;
}

static void unwatch(struct remote *r)
{
    if (r->watch_started) {
        (void)!write(r->wake[1], "x", 1);
        pthread_join(r->watch_thread, NULL);
        r->watch_started = false;
    }
}

/* This end dialled its data connection: where it reached, kept. */
static bool dialled(struct remote *r)
{
    r->again_len = sizeof r->again;
    return r->data_fd >= 0 &&
           getpeername(r->data_fd, (struct sockaddr *)&r->again, &r->again_len) == 0 &&
           (r->again.ss_family == AF_INET || r->again.ss_family == AF_INET6);
}

/* The local end's start: the sending side's options go to the remote end,
 * --connect-back's port opens, ssh starts and the two weirs talk. */
static int start_local(struct remote *r, struct weir_config *c, struct weir_error *err)
{
    if (r->o->pull) {
        /* the sending side's options went to the remote end */
        c->compress = c->zstd = false;
        c->read_rate = 0;
    } else if (c->noutputs >= WEIR_MAX_OUTPUTS) {
        return error_set(err, WEIR_EXIT_USAGE, "too many outputs for --ssh");
    }
    int back = 0;
    if (r->o->connect_back) {
        struct tcp_settings ts = {.family = r->o->family};
        snprintf(ts.listen_port, sizeof ts.listen_port, "0");
        if (tcp_listen(&ts, &r->back, err))
            return -1;
        const char *colon = strrchr(r->back.addr, ':');
        back = colon ? atoi(colon + 1) : 0;
        log_msg(r->log, LOG_INFO, "ssh %s: --connect-back: listening on %s", r->o->ssh_host,
                r->back.addr);
    }
    if (sync_stop_watch_start(&r->halt, err))
        return -1;
    int rc = spawn_ssh(r, true, err) || handshake(r, back, err) ? -1 : 0;
    sync_stop_watch_end(&r->halt);
    if (rc)
        return -1;
    return 0;
}

/* This end receives: the engine's input is the connection made, and a
 * broken one comes back as it can (to the kept port, through a new ssh
 * session, or dialled again). */
static void configure_input(struct remote *r, struct weir_config *c)
{
    c->input = WEIR_IN_LISTEN;
    c->tcp.listen_port[0] = '\0';   /* no listening socket: the connection is made */
    c->channel_fd = r->data_fd;
    c->channel_trusted = r->tunnel;
    c->channel_name = r->data_name;
    if (r->keep.fd >= 0) {
        c->listen_fd = r->keep.fd;
        r->keep.fd = -1;
        /* only the other weir's host may come back (its key, or through
         * ssh the session's token, proves it is the other weir); through
         * ssh it comes back from this host */
        snprintf(c->tcp.allow_host, sizeof c->tcp.allow_host, "%s", r->keep_host);
    } else if (r->tunnel && !r->server && r->rejoin_port[0]) {
        c->input_redial = tunnel_redial;   /* back through a new ssh session */
        c->input_redial_ctx = r;
    } else if (!r->tunnel && dialled(r)) {
        c->input_redial = redial_again;
        c->input_redial_ctx = r;
    }
}

/* This end sends: the TCP output (the one named, or a new one) is the
 * connection made, and a broken one is redialled as it can. */
static void configure_output(struct remote *r, struct weir_config *c)
{
    struct weir_output *d = NULL;
    for (int i = 0; i < c->noutputs; i++)
        if (c->outputs[i].kind == WEIR_OUT_TCP)
            d = &c->outputs[i];
    if (!d)
        d = &c->outputs[c->noutputs++];
    memset(d, 0, sizeof *d);
    d->kind = WEIR_OUT_TCP;
    d->connected = true;
    d->fd = r->data_fd;
    if (r->keep.fd >= 0) {
        d->redial = accept_again;   /* the receiver comes back to this end */
        d->redial_ctx = r;
    } else if (!r->server && r->tunnel && r->rejoin_port[0]) {
        d->redial = tunnel_redial;   /* a broken tunnel comes back through ssh */
        d->redial_ctx = r;
    }
    snprintf(d->host, sizeof d->host, "%s", r->data_name);
}

int remote_configure(struct remote *r, struct weir_config *c, struct weir_error *err)
{
    r->reconnect = c->reconnect;
    bool receives = r->server ? r->push : r->o->pull;
    if (!r->server && start_local(r, c, err))
        return -1;
    /* through ssh, weir adds no encryption of its own: ssh's is there */
    c->key_text = r->tunnel ? NULL : r->key;
    c->key_text_len = r->tunnel ? 0 : (size_t)r->key_len;
    c->port_told = true;
    if (receives)
        configure_input(r, c);
    else
        configure_output(r, c);
    r->data_fd = -1;   /* the engine's now */
    return 0;
}

int remote_started(struct remote *r, struct weir_engine *e, struct weir_error *err)
{
    /* a tunnel's end comes through the relay, in the stream */
    if (r->server && r->tunnel)
        return 0;
    return watch(r, e, err);
}

/* How long ssh gets to end by itself after the transfer, and again once
 * its channel is closed: as long as a silent peer is trusted (10 s, or a
 * shorter --timeout, 2 s at least). */
static double ssh_grace(const struct remote *r)
{
    return session_silence(r->o->io_timeout);
}

/* The chain's status, once ssh has ended. */
static int verdict(struct remote *r, int status)
{
    const char *host = r->o->ssh_host;
    if (!r->ssh_reaped) {
        log_msg(r->log, LOG_ERROR, "ssh %s: still running %g s after the transfer: stopped",
                host, 2 * ssh_grace(r));
        return status ? status : WEIR_EXIT_NETWORK;
    }
    int ws = r->ssh_status;
    char last[256];
    kept_line(r, r->ssh_line, last, sizeof last);
    log_msg(r->log, LOG_DEBUG, "ssh %s: pid %ld ended with wait status 0x%x", host,
            (long)r->ssh_pid, ws);
    bool ssh_died = (WIFEXITED(ws) && WEXITSTATUS(ws) == 255) || WIFSIGNALED(ws);
    if (status == 0 && (r->ssh_lost || (ssh_died && !r->ssh_stopped))) {
        /* a push: the remote end's answer came after its output and command
         * were done; a pull: the stream arrived whole and verified, and a
         * remote producer that failed would have aborted it */
        log_msg(r->log, LOG_INFO, "ssh %s: the transfer ended after its ssh connection did; %s "
                "vouches for it", host, r->o->pull ? "the stream's verified end"
                                                   : "the remote end's answer");
        return 0;
    }
    if (status == 0 && r->ssh_stopped) {
        /* something the remote command left running (a background job)
         * held the session open past the grace period, and ssh was stopped
         * here; the transfer itself is vouched for as above */
        log_msg(r->log, LOG_WARN, "ssh %s: the session was still open %g s after the "
                "transfer (a process the remote command left behind holds it): ssh stopped; "
                "%s vouches for the transfer", host, 2 * ssh_grace(r),
                r->o->pull ? "the stream's verified end" : "the remote end's answer");
        return 0;
    }
    if (status != 0 && !r->ssh_stopped && !r->said_why &&
        !(WIFEXITED(ws) && WEXITSTATUS(ws) != 255))
        /* ssh itself ended badly: likely why the transfer failed */
        log_msg(r->log, LOG_ERROR, "ssh %s: the ssh connection ended (%s %d)%s%s", host,
                WIFSIGNALED(ws) ? "killed by signal" : "status",
                WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws), last[0] ? ": " : "", last);
    /* the connection failed because the remote weir did: its reason (a
     * producer or consumer that failed, say) is the chain's */
    if (status == WEIR_EXIT_NETWORK && !r->too_old && WIFEXITED(ws) && WEXITSTATUS(ws) != 0 &&
        WEXITSTATUS(ws) != WEIR_EXIT_NETWORK && WEXITSTATUS(ws) <= WEIR_EXIT_INTEGRITY)
        return WEXITSTATUS(ws);
    if (status != 0 || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0))
        return status;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 255) {
        log_msg(r->log, LOG_ERROR, "ssh %s: the connection failed%s%s", host,
                last[0] ? ": " : "", last);
        return WEIR_EXIT_NETWORK;
    }
    if (WIFEXITED(ws)) {
        log_msg(r->log, LOG_ERROR, "remote: the weir on %s exited with status %d", host,
                WEXITSTATUS(ws));
        return WEXITSTATUS(ws);
    }
    log_msg(r->log, LOG_ERROR, "ssh %s: killed by signal %d", host,
            WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    return WEIR_EXIT_NETWORK;
}

int remote_finish(struct remote *r, int status)
{
    unwatch(r);
    held_show(r);
    if (r->server) {
        /* what the remote command started may outlive it (a shell does not
         * pass SIGTERM on), and would hold the ssh session open: after a
         * failure the whole process group this weir leads goes (sshd made
         * it the leader; the weir itself has SIGTERM blocked) */
        if (status != 0 && getpgrp() == getpid())
            (void)kill(0, SIGTERM);
        return status;
    }
    if (r->ssh_pid <= 0)
        return status;
    /* after a success the remote weir ends by itself; after a failure its
     * channel closes, and it stops as for SIGTERM */
    if (status != 0 || !ssh_reap(r, ssh_grace(r))) {
        /* the remote weir takes the end of its ssh session for a dropped
         * connection it may wait out, unless told first; a channel that may
         * be the stream (the tunnel, or a start that did not get so far)
         * is only closed: an "end" there would be bytes of the stream, and
         * the remote weir ends with the channel */
        if (r->ctl_out >= 0 && r->direct)
            (void)put_all(r->ctl_out, "end\n", 4);
        if (r->ctl_in >= 0)
            close(r->ctl_in);
        r->ctl_in = r->ctl_out = -1;
        /* interrupted: ssh gets a moment, not the grace of a transfer */
        if (!ssh_reap(r, status >= WEIR_EXIT_SIGNAL ? 1.0 : ssh_grace(r))) {
            r->ssh_stopped = true;
            kill(r->ssh_pid, SIGTERM);
            if (!ssh_reap(r, 2.0)) {
                kill(r->ssh_pid, SIGKILL);
                ssh_reap(r, 2.0);
            }
        }
    }
    atomic_store(&r->err_stop, true);
    if (r->err_started) {
        pthread_join(r->err_thread, NULL);
        r->err_started = false;
    }
    return verdict(r, status);
}

void remote_free(struct remote *r)
{
    if (!r)
        return;
    if (!r->server && r->ssh_pid > 0 && !r->ssh_reaped) {
        kill(r->ssh_pid, SIGKILL);
        waitpid(r->ssh_pid, NULL, 0);
    }
    atomic_store(&r->err_stop, true);
    if (r->err_started)
        pthread_join(r->err_thread, NULL);
    unwatch(r);
    sync_stop_watch_end(&r->halt);
    if (r->data_fd >= 0)   /* never handed to an engine */
        close(r->data_fd);
    r->data_fd = -1;
    if (r->relay_out_started)   /* it ends once the engine's end is closed */
        pthread_join(r->relay_out, NULL);
    if (r->relay_in_started) {
        (void)!write(r->wake[1], "x", 1);
        pthread_join(r->relay_in, NULL);
    }
    if (r->relay[1] >= 0)
        close(r->relay[1]);
    if (r->back.fd >= 0)
        tcp_listener_close(&r->back);
    if (r->keep.fd >= 0)
        tcp_listener_close(&r->keep);
    if (r->ctl_in >= 0)
        close(r->ctl_in);
    if (r->ctl_out >= 0 && r->ctl_out != r->ctl_in)
        close(r->ctl_out);
    if (r->err_fd >= 0)
        close(r->err_fd);
    for (int i = 0; i < 2; i++)
        if (r->wake[i] >= 0)
            close(r->wake[i]);
    secret_free(r->key, KEY_TEXT_MAX);
    secret_free(r->request, REMOTE_REQUEST_MAX);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
