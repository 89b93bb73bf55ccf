/*
 * serve.c - the service: its configuration, its listening sockets, the
 * processes of its transfers, and its signals.  See serve.h.
 *
 * One thread.  Signals are caught into one flag word; the loop waits in
 * poll() for a connection, a transfer's message or a signal (which
 * interrupts the wait; a signal that comes just before the wait is seen
 * within SERVE_TICK_MS).
 */
#include "serve/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sync.h"
#include "crypto/keyfile.h"
#include "crypto/tls.h"
#include "format/codec.h"
#include "link/listener.h"
#include "os/os.h"
#include "serve/serve_int.h"
#include "serve/systemd.h"
#include "transport/tcp.h"

#define SERVE_TICK_MS 250
#define SERVE_KIDS_MAX (SERVE_MAX_TRANSFERS + SERVE_PENDING_MAX)
#define ACCEPT_BATCH 16

/* The only global: the signals caught since the loop last looked. */
static volatile sig_atomic_t serve_caught;
enum { CAUGHT_HUP = 1, CAUGHT_TERM = 2, CAUGHT_CHLD = 4 };

static void catch_signal(int sig)
{
    serve_caught |= sig == SIGHUP ? CAUGHT_HUP : sig == SIGCHLD ? CAUGHT_CHLD : CAUGHT_TERM;
}

/* A connection's process. */
struct kid {
    pid_t pid;                 /* 0: a free entry */
    int control;
    bool claimed;              /* a transfer runs: client and target are set */
    bool parked;               /* its claim (client and target) waits for the target's
                                  last transfer to end, until park_until */
    double park_until;
    bool ended;                /* it said how it ended */
    char client[KEY_ID_MAX + 1];
    char target[CODEC_TARGET_MAX + 1];
    char peer[80];
    uint32_t route;            /* claimed: the number its sender gives when it comes back */
    double start;
    unsigned long long bytes;
    double secs;
    int status;
};

/* A connection greeted by the service, whose sender's greeting it waits
 * for: a sender coming back names its transfer's route there. */
struct waiting {
    int fd;                    /* -1: a free entry */
    double deadline;
    char peer[80];
};

/* What the service loads from its file: replaced whole by a reload. */
struct loaded {
    struct serve_conf conf;
    struct keyring keys;
    struct tls_context *tls;
};

struct service {
    const char *path;
    struct weir_log *log;
    struct loaded *cur;        /* on the heap: its TLS context points at its keys */
    struct tcp_listener l[SERVE_LISTEN_MAX];
    int nl;
    bool activated;            /* the sockets are systemd's */
    struct kid kids[SERVE_KIDS_MAX];
    struct waiting waiting[SERVE_PENDING_MAX];
    int nwaiting;
    int claimed, pending;
    bool stopping;
    double stop_at;            /* when the running transfers are told to stop */
    int stop_step;             /* 0, 1: told (SIGTERM), 2: killed */
    char notify[108];          /* NOTIFY_SOCKET, taken out of the environment; "": none */
    double crowd_second;       /* connections closed unheard: logged once a second */
    unsigned long crowd;
};

/* ---- the configuration and the keys ------------------------------------- */

static void unload(struct loaded *d)
{
    if (!d)
        return;
    tls_context_free(d->tls);
    keyfile_free(&d->keys);
    serve_conf_free(&d->conf);
    free(d);
}

/* The file and its keys, whole, or NULL with *err. */
static struct loaded *load(const char *path, struct weir_log *log, struct weir_error *err)
{
    struct loaded *d = calloc(1, sizeof *d);
    if (!d)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "%s", path), NULL;
    if (serve_conf_load(&d->conf, path, log, err))
        return free(d), NULL;
    const struct key *first;
    if (keyfile_load(&d->keys, d->conf.key_file, NULL, &first, err) ||
        serve_conf_check(&d->conf, &d->keys, err) ||
        tls_context_new(&d->tls, &d->keys, NULL, true, err)) {
        unload(d);
        return NULL;
    }
    return d;
}

static void notify(struct service *s, const char *state)
{
    systemd_notify(s->notify, state, s->log);
}

static int listen_conf(struct service *s, const struct serve_conf *c, struct tcp_listener *l,
                       struct weir_error *err)
{
    if (!c->port[0])
        return error_set(err, WEIR_EXIT_USAGE, "%s: no listen line, and systemd passed no "
                         "socket", c->path);
    struct tcp_settings t = {.bind_addr = c->bind[0] ? c->bind : NULL};
    snprintf(t.listen_port, sizeof t.listen_port, "%s", c->port);
    (void)s;
    return tcp_listen(&t, l, err);
}

/* ---- transfers' processes ----------------------------------------------- */

static struct kid *free_kid(struct service *s)
{
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        if (!s->kids[i].pid)
            return &s->kids[i];
    return NULL;
}

/* In the new process: nothing of the service's but what it needs. */
static void run_kid(struct service *s, int conn, int control, const char *peer,
                    const sigset_t *mask)
{
    for (int i = 0; i < s->nl; i++)
        close(s->l[i].fd);
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        if (s->kids[i].pid)
            close(s->kids[i].control);
    for (int i = 0; i < SERVE_PENDING_MAX; i++)
        if (s->waiting[i].fd >= 0)
            close(s->waiting[i].fd);
    struct serve_child c = {.conf = &s->cur->conf, .tls = s->cur->tls, .conn = conn,
                            .control = control, .log = s->log, .mask = mask};
    snprintf(c.peer, sizeof c.peer, "%s", peer);
    int status = serve_transfer(&c);
    fflush(NULL);
    _exit(status);
}

/* A process for the connection conn from peer. */
static void spawn(struct service *s, int conn, const char *peer)
{
    struct kid *k = free_kid(s);
    int sp[2] = {-1, -1};
    if (!k || socketpair(AF_UNIX, SOCK_DGRAM, 0, sp) != 0 ||
        fcntl(sp[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(sp[1], F_SETFD, FD_CLOEXEC) != 0) {
        log_msg(s->log, LOG_ERROR, "connection from %s: closed: %s", peer,
                k ? strerror(errno) : "no room for another process");
        goto fail;
    }
    /* no signal reaches the new process before it has its own handlers
     * (a stop's SIGTERM waits, and then ends it) */
    sigset_t all, old;
    sigfillset(&all);
    sync_sigmask_get(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        close(sp[0]);
        run_kid(s, conn, sp[1], peer, &old);
    }
    int e = errno;
    sync_sigmask(SIG_SETMASK, &old);
    if (pid < 0) {
        log_msg(s->log, LOG_ERROR, "connection from %s: closed: fork: %s", peer, strerror(e));
        goto fail;
    }
    close(sp[1]);
    close(conn);
    *k = (struct kid){.pid = pid, .control = sp[0], .start = clock_now()};
    snprintf(k->peer, sizeof k->peer, "%s", peer);
    s->pending++;
    return;
fail:
    if (sp[0] >= 0)
        close(sp[0]), close(sp[1]);
    close(conn);
}

/* A connection the service cannot hear now: closed, and counted. */
static void crowd(struct service *s, int conn, const char *why)
{
    close(conn);
    s->crowd++;
    double now = clock_now();
    if (now - s->crowd_second < 1)
        return;
    log_msg(s->log, LOG_WARN, "%lu connection%s closed unheard: %s", s->crowd,
            s->crowd == 1 ? "" : "s", why);
    s->crowd = 0;
    s->crowd_second = now;
}

static void wait_greeting(struct service *s, int fd, const char *peer)
{
    for (int i = 0; i < SERVE_PENDING_MAX; i++) {
        struct waiting *w = &s->waiting[i];
        if (w->fd >= 0)
            continue;
        *w = (struct waiting){.fd = fd, .deadline = clock_now() + LISTENER_HANDSHAKE_SECS};
        snprintf(w->peer, sizeof w->peer, "%s", peer);
        s->nwaiting++;
        return;
    }
    close(fd);   /* not reached: nwaiting counts the entries */
}

/* The route a sender's greeting names to come back to, or 0. */
static uint32_t route_of(int fd)
{
    unsigned char g[CODEC_GREETING_SIZE];
    struct codec_record r;
    char why[96];
    ssize_t n = recv(fd, g, sizeof g, MSG_PEEK | MSG_DONTWAIT);
    if (n != (ssize_t)sizeof g || codec_parse_record(g, sizeof g, &r, why, sizeof why) ||
        r.type != 'G' || r.role != CODEC_ROLE_SENDER)
        return 0;
    return r.route;
}

static struct kid *routed(struct service *s, uint32_t route)
{
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        if (s->kids[i].pid && s->kids[i].claimed && s->kids[i].route == route)
            return &s->kids[i];
    return NULL;
}

/* A sender came back to a transfer that is over: it is told so in place
 * of the handshake (an 'S' record, as a listener refuses before it), so
 * that it stops trying. */
static void gone(struct service *s, int fd, const char *peer)
{
    static const char why[] = "the transfer this sender comes back to is over here (its "
                              "process ended)";
    unsigned char rec[CODEC_RECORD_MAX];
    size_t n = codec_status(rec, WEIR_EXIT_NETWORK, 0, 0, why);
    char junk[4096];
    for (int i = 0; i < 4 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++)
        ;   /* what it sent, read: a close with unread bytes would reset the answer away */
    if (os_send(fd, rec, n, true) != (ssize_t)n)
        log_msg(s->log, LOG_DEBUG, "connection from %s: cannot tell it: %s", peer,
                strerror(errno));
    (void)shutdown(fd, SHUT_WR);
    close(fd);
    log_msg(s->log, LOG_WARN, "refused connection from %s: %s", peer, why);
}

/* A waiting connection spoke (or closed): a sender coming back goes to
 * its transfer's process, with what it sent still unread; any other to a
 * new process, which admits or refuses it. */
static void route_waiting(struct service *s, struct waiting *w)
{
    int fd = w->fd;
    char peer[80];
    snprintf(peer, sizeof peer, "%s", w->peer);
    w->fd = -1;   /* the entry is free before a new process closes the others */
    s->nwaiting--;
    uint32_t route = route_of(fd);
    struct kid *k = route ? routed(s, route) : NULL;
    char probe;
    if (k && tcp_pass_fd(k->control, fd, peer, strlen(peer)) != 0)
        log_msg(s->log, LOG_WARN, "connection from %s: cannot hand it to its transfer: %s",
                peer, strerror(errno));
    if (k)
        close(fd);
    else if (route)
        gone(s, fd, peer);
    else if (recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
        close(fd);   /* it closed without a word */
    else
        spawn(s, fd, peer);
}

static void expire_waiting(struct service *s)
{
    double now = clock_now();
    for (int i = 0; i < SERVE_PENDING_MAX; i++) {
        struct waiting *w = &s->waiting[i];
        if (w->fd < 0 || now < w->deadline)
            continue;
        log_msg(s->log, LOG_DEBUG, "dropped connection from %s: it sent no greeting", w->peer);
        close(w->fd);
        w->fd = -1;
        s->nwaiting--;
    }
}

/* Whether two peers ("host:port", "[v6]:port") are the same host. */
static bool same_host(const char *a, const char *b)
{
    const char *ea = strrchr(a, ':'), *eb = strrchr(b, ':');
    size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
    return la == lb && memcmp(a, b, la) == 0;
}

/* Connections from peer's host not yet admitted: waiting for a greeting,
 * or in a process that has not claimed a transfer. */
static int from_address(const struct service *s, const char *peer)
{
    int n = 0;
    for (int i = 0; i < SERVE_PENDING_MAX; i++)
        n += s->waiting[i].fd >= 0 && same_host(s->waiting[i].peer, peer);
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        n += s->kids[i].pid && !s->kids[i].claimed && same_host(s->kids[i].peer, peer);
    return n;
}

static void accept_some(struct service *s, struct tcp_listener *l)
{
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t slen = sizeof ss;
        int fd = os_accept(l->fd, (struct sockaddr *)&ss, &slen);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                log_msg(s->log, LOG_ERROR, "listen %s: accept: %s", l->addr, strerror(errno));
            return;
        }
        char peer[80];
        tcp_format_addr((struct sockaddr *)&ss, peer, sizeof peer);
        unsigned char g[CODEC_GREETING_SIZE];
        size_t n = listener_serve_greeting(g);
        if (s->nwaiting >= SERVE_PENDING_MAX || s->pending >= SERVE_PENDING_MAX)
            crowd(s, fd, "too many connections are being admitted");
        else if (from_address(s, peer) >= SERVE_PER_ADDRESS)
            crowd(s, fd, "too many connections from one address are being admitted");
        else if (os_send(fd, g, n, true) != (ssize_t)n)
            close(fd);   /* it reset at once */
        else
            wait_greeting(s, fd, peer);
    }
}

/* ---- what transfers say -------------------------------------------------- */

/* Why a claim is refused, or NULL; *same: because the target has a
 * transfer under way. */
static const char *refuse_claim(struct service *s, const char *client, const char *target,
                                char *why, size_t len, bool *same)
{
    *same = false;
    if (s->stopping)
        return "no the service is stopping";
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        if (s->kids[i].pid && s->kids[i].claimed && strcmp(s->kids[i].client, client) == 0 &&
            strcmp(s->kids[i].target, target) == 0) {
            snprintf(why, len, "no busy: client %s target %s has a transfer under way", client,
                     target);
            *same = true;
            return why;
        }
    if (s->claimed >= s->cur->conf.max_transfers) {
        snprintf(why, len, "no busy: %d transfers are under way here (max-transfers)",
                 s->claimed);
        return why;
    }
    return NULL;
}

/* A route no running transfer has, never 0; random, so that one transfer's
 * route says nothing of another's. */
static uint32_t new_route(struct service *s)
{
    for (;;) {
        uint32_t r = 0;
        if (RAND_bytes((unsigned char *)&r, sizeof r) != 1)
            r = (uint32_t)(clock_now() * 1e6) ^ (uint32_t)getpid();
        bool taken = r == 0;
        for (int i = 0; i < SERVE_KIDS_MAX && !taken; i++)
            taken = s->kids[i].pid && s->kids[i].route == r;
        if (!taken)
            return r;
    }
}

/* Answer the claim of k (k->client, k->target): granted, refused, or,
 * when the target's last transfer is still ending, parked (retried as
 * processes end, until park_until): a client's next transfer to the same
 * target may come the moment its sender has the last one's answer, while
 * that transfer's process is still going. */
static void answer_claim(struct service *s, struct kid *k)
{
    char why[300];
    bool same;
    const char *no = refuse_claim(s, k->client, k->target, why, sizeof why, &same);
    if (no && same && clock_now() < k->park_until) {
        k->parked = true;
        return;
    }
    k->parked = false;
    uint32_t route = no ? 0 : new_route(s);
    char ok[32];
    snprintf(ok, sizeof ok, "ok %u", (unsigned)route);
    const char *answer = no ? no : ok;
    if (send(k->control, answer, strlen(answer), MSG_DONTWAIT) < 0 || no)
        return;
    k->route = route;
    k->claimed = true;
    k->start = clock_now();
    s->claimed++;
    s->pending--;
    log_msg(s->log, LOG_NOTICE, "client %s target %s: transfer from %s begins", k->client,
            k->target, k->peer);
}

static void take_claim(struct service *s, struct kid *k, const char *msg)
{
    char client[KEY_ID_MAX + 1], target[CODEC_TARGET_MAX + 1];
    if (k->claimed || k->parked || sscanf(msg, "claim %64s %63s", client, target) != 2) {
        log_msg(s->log, LOG_ERROR, "transfer process %ld: a malformed message", (long)k->pid);
        kill(k->pid, SIGKILL);
        return;
    }
    snprintf(k->client, sizeof k->client, "%s", client);
    snprintf(k->target, sizeof k->target, "%s", target);
    k->park_until = clock_now() + SERVE_CLAIM_WAIT_SECS;
    answer_claim(s, k);
}

/* The parked claims again: a process ended, or time passed. */
static void unpark(struct service *s)
{
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        if (s->kids[i].pid && s->kids[i].parked)
            answer_claim(s, &s->kids[i]);
}

static void hear_kid(struct service *s, struct kid *k)
{
    char msg[SERVE_MSG_MAX];
    ssize_t n = recv(k->control, msg, sizeof msg - 1, MSG_DONTWAIT);
    if (n <= 0)
        return;
    msg[n] = 0;
    if (strncmp(msg, "claim ", 6) == 0) {
        take_claim(s, k, msg);
    } else if (k->claimed &&
               sscanf(msg, "end %llu %lf %d", &k->bytes, &k->secs, &k->status) == 3) {
        k->ended = true;
    }
}

/* ---- processes that ended ------------------------------------------------ */

static void say_end(struct service *s, const struct kid *k, int wstatus)
{
    char how[80];
    if (WIFSIGNALED(wstatus))
        snprintf(how, sizeof how, "killed by signal %d (%s)", WTERMSIG(wstatus),
                 sync_signal_name(WTERMSIG(wstatus)));
    else if (WEXITSTATUS(wstatus) == 0)
        snprintf(how, sizeof how, "complete");
    else
        snprintf(how, sizeof how, "failed (exit %d)", WEXITSTATUS(wstatus));
    double secs = k->ended ? k->secs : clock_now() - k->start;
    char bytes[48] = "bytes unknown";
    if (k->ended)
        snprintf(bytes, sizeof bytes, "%llu bytes", k->bytes);
    log_msg(s->log, WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 ? LOG_NOTICE : LOG_ERROR,
            "client %s target %s: transfer from %s ended: %s in %.1f s (%.1f MB/s), %s",
            k->client, k->target, k->peer, bytes, secs,
            k->ended && secs > 0 ? (double)k->bytes / secs / 1e6 : 0.0, how);
}

static void reap(struct service *s)
{
    int wstatus;
    pid_t pid;
    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
        for (int i = 0; i < SERVE_KIDS_MAX; i++) {
            struct kid *k = &s->kids[i];
            if (k->pid != pid)
                continue;
            hear_kid(s, k);   /* its last word may still wait */
            if (k->claimed)
                say_end(s, k, wstatus);
            s->claimed -= k->claimed;
            s->pending -= !k->claimed;
            close(k->control);
            *k = (struct kid){0};
            break;
        }
    }
}

/* ---- signals: reload and stop -------------------------------------------- */

static bool same_listen(const struct serve_conf *a, const struct serve_conf *b)
{
    return strcmp(a->bind, b->bind) == 0 && strcmp(a->port, b->port) == 0;
}

/* SIGHUP: the file and its keys again, whole or not at all. */
static void reload(struct service *s)
{
    notify(s, "RELOADING=1");
    struct weir_error err;
    struct tcp_listener l = {.fd = -1};
    bool moved = !s->activated && !s->stopping;
    struct loaded *next = load(s->path, s->log, &err);
    if (!next) {
        log_msg(s->log, LOG_ERROR, "reload: %s: the configuration in use stays", err.msg);
    } else if (moved && !same_listen(&next->conf, &s->cur->conf) &&
               listen_conf(s, &next->conf, &l, &err)) {
        log_msg(s->log, LOG_ERROR, "reload: %s: the configuration in use stays", err.msg);
        unload(next);
    } else {
        if (l.fd >= 0) {
            tcp_listener_close(&s->l[0]);
            s->l[0] = l;
            log_msg(s->log, LOG_NOTICE, "listening on %s", l.addr);
        }
        unload(s->cur);
        s->cur = next;
        log_msg(s->log, LOG_NOTICE, "reloaded %s: %zu targets, max-transfers %d", s->path,
                s->cur->conf.ntargets, s->cur->conf.max_transfers);
    }
    notify(s, "READY=1");
}

static void signal_kids(struct service *s, bool claimed, int sig)
{
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        if (s->kids[i].pid && s->kids[i].claimed == claimed)
            kill(s->kids[i].pid, sig);
}

/* SIGTERM, SIGINT: no new connection; the running transfers get their
 * time, then are told to stop (a second signal tells them at once). */
static void stop(struct service *s)
{
    double now = clock_now();
    if (s->stopping) {
        s->stop_at = now;
        return;
    }
    s->stopping = true;
    s->stop_at = now + SERVE_STOP_SECS;
    notify(s, "STOPPING=1");
    for (int i = 0; i < s->nl; i++)
        tcp_listener_close(&s->l[i]);
    s->nl = 0;
    for (int i = 0; i < SERVE_PENDING_MAX; i++)
        if (s->waiting[i].fd >= 0)
            close(s->waiting[i].fd), s->waiting[i].fd = -1;
    s->nwaiting = 0;
    signal_kids(s, false, SIGTERM);   /* connections not yet transfers */
    log_msg(s->log, LOG_NOTICE, "stopping: %d transfer%s under way, given %.0f s to end",
            s->claimed, s->claimed == 1 ? "" : "s", SERVE_STOP_SECS);
}

static void stop_steps(struct service *s)
{
    double now = clock_now();
    if (!s->stopping || now < s->stop_at)
        return;
    if (s->stop_step == 0 && s->claimed > 0)
        log_msg(s->log, LOG_WARN, "stopping: %d transfer%s still under way: telling them to "
                "stop", s->claimed, s->claimed == 1 ? "" : "s");
    if (s->stop_step == 0) {
        signal_kids(s, true, SIGTERM);
        s->stop_step = 1;
        s->stop_at = now + SERVE_KILL_SECS;
        return;
    }
    if (s->stop_step == 1) {
        signal_kids(s, true, SIGKILL);
        signal_kids(s, false, SIGKILL);
        s->stop_step = 2;
    }
}

/* ---- the loop ------------------------------------------------------------ */

static void take_signals(struct service *s)
{
    sigset_t all, old;
    sigfillset(&all);
    sync_sigmask_get(SIG_BLOCK, &all, &old);
    int caught = serve_caught;
    serve_caught = 0;
    sync_sigmask(SIG_SETMASK, &old);
    if (caught & CAUGHT_CHLD)
        reap(s);
    if (caught & CAUGHT_HUP)
        reload(s);
    if (caught & CAUGHT_TERM)
        stop(s);
}

#define SERVE_POLL_MAX (SERVE_LISTEN_MAX + SERVE_KIDS_MAX + SERVE_PENDING_MAX)

/* Wait for a connection, a greeting, a message or a signal, and take what
 * came. */
static void turn(struct service *s)
{
    struct pollfd pfd[SERVE_POLL_MAX];
    struct kid *who[SERVE_POLL_MAX];
    struct waiting *greeter[SERVE_POLL_MAX];
    int n = 0;
    for (int i = 0; i < s->nl; i++)
        pfd[n++] = (struct pollfd){.fd = s->l[i].fd, .events = POLLIN};
    for (int i = 0; i < SERVE_KIDS_MAX; i++)
        if (s->kids[i].pid) {
            who[n] = &s->kids[i], greeter[n] = NULL;
            pfd[n++] = (struct pollfd){.fd = s->kids[i].control, .events = POLLIN};
        }
    for (int i = 0; i < SERVE_PENDING_MAX; i++)
        if (s->waiting[i].fd >= 0) {
            who[n] = NULL, greeter[n] = &s->waiting[i];
            pfd[n++] = (struct pollfd){.fd = s->waiting[i].fd, .events = POLLIN};
        }
    int r = poll(pfd, (nfds_t)n, SERVE_TICK_MS);
    if (r < 0 && errno != EINTR)
        log_msg(s->log, LOG_ERROR, "poll: %s", strerror(errno));
    for (int i = s->nl; r > 0 && i < n; i++)
        if (who[i] && (pfd[i].revents & POLLIN))
            hear_kid(s, who[i]);
        else if (greeter[i] && pfd[i].revents)
            route_waiting(s, greeter[i]);
    for (int i = 0; r > 0 && i < s->nl; i++)
        if (pfd[i].revents)
            accept_some(s, &s->l[i]);
    expire_waiting(s);
    take_signals(s);
    unpark(s);
    stop_steps(s);
}

static int catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = catch_signal;   /* no SA_RESTART: poll() returns at once */
    sigfillset(&sa.sa_mask);
    int sigs[] = {SIGHUP, SIGTERM, SIGINT, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return -1;
    sa.sa_handler = SIG_IGN;
    return sigaction(SIGPIPE, &sa, NULL);
}

/* Load the file and listen: 0, or the exit status with the cause said. */
static int start(struct service *s, struct weir_error *err)
{
    if (catch_signals() != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "sigaction");
    /* systemd's word is the service's: no target may speak for it */
    const char *ns = getenv("NOTIFY_SOCKET");
    snprintf(s->notify, sizeof s->notify, "%s", ns ? ns : "");
    unsetenv("NOTIFY_SOCKET");
    if (!(s->cur = load(s->path, s->log, err)))
        return -1;
    int activated = systemd_sockets(s->l, SERVE_LISTEN_MAX, &s->nl, err);
    if (activated < 0)
        return -1;
    s->activated = activated > 0;
    if (!activated && listen_conf(s, &s->cur->conf, &s->l[0], err) == 0)
        s->nl = 1;
    if (s->nl == 0)
        return -1;
    for (int i = 0; i < s->nl; i++)
        log_msg(s->log, LOG_NOTICE, "listening on %s%s: %zu targets, max-transfers %d",
                s->l[i].addr, s->activated ? " (socket from systemd)" : "",
                s->cur->conf.ntargets, s->cur->conf.max_transfers);
    notify(s, "READY=1");
    return 0;
}

int serve_main(const char *conf_path, struct weir_log *log)
{
    struct service *s = calloc(1, sizeof *s);
    if (!s) {
        log_msg(log, LOG_ERROR, "--serve: %s", strerror(ENOMEM));
        return WEIR_EXIT_INTERNAL;
    }
    s->path = conf_path;
    s->log = log;
    for (int i = 0; i < SERVE_PENDING_MAX; i++)
        s->waiting[i].fd = -1;
    struct weir_error err;
    int status = 0;
    if (start(s, &err)) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        status = err.status;
    } else {
        while (!s->stopping || s->claimed + s->pending > 0)
            turn(s);
        log_msg(log, LOG_NOTICE, "stopped");
    }
    for (int i = 0; i < s->nl; i++)
        tcp_listener_close(&s->l[i]);
    unload(s->cur);
    free(s);
    return status;
}
