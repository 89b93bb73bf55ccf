/*
 * transfer.c - one connection to a service, in a process of its own: the
 * sender admitted, its target found and claimed, the privileges dropped to
 * the target's user, and the engine run from that connection into the
 * target's file or command.  See serve_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/io.h"
#include "base/sync.h"
#include "format/codec.h"
#include "link/listener.h"
#include "options/options.h"
#include "serve/serve_int.h"
#include "weir/weir.h"

#define REFUSAL_DRAIN_MS 5000   /* what the sender still sends is read, so the refusal is not reset away */
#define SERVE_ARGS_MAX 260

/* Tell the admitted sender why nothing runs for it (an 'S' record, the last
 * of this direction), read what it still sends for a while, and close. */
static void refuse(struct listener_admitted *a, const char *why)
{
    unsigned char rec[CODEC_RECORD_MAX];
    size_t n = codec_status(rec, WEIR_EXIT_NETWORK, 0, 0, why);
    atomic_bool never = false;
    transport_sealed_last(&a->t);
    if (transport_write_all(&a->t, rec, n, 10000, &never) == 0 &&
        shutdown(a->t.fd, SHUT_WR) == 0)
        io_drain(a->t.fd, REFUSAL_DRAIN_MS / 1000.0);
    struct weir_error ignored;
    transport_close(&a->t, false, NULL, &ignored);
}

/* Ask the service whether this transfer may run: 0 with its route, or -1
 * with why. */
static int claim(const struct serve_child *c, const struct serve_target *t, uint32_t *route,
                 char *why, size_t len)
{
    char msg[SERVE_MSG_MAX];
    int n = snprintf(msg, sizeof msg, "claim %s %s", t->client, t->name);
    if (send(c->control, msg, (size_t)n, 0) != n)
        return snprintf(why, len, "the service is stopping"), -1;
    struct pollfd p = {.fd = c->control, .events = POLLIN};
    ssize_t r = poll(&p, 1, (int)(SERVE_CLAIM_SECS * 1000)) == 1
                    ? recv(c->control, msg, sizeof msg - 1, 0) : -1;
    if (r <= 0)
        return snprintf(why, len, "the service did not answer"), -1;
    msg[r] = 0;
    unsigned got;
    char end;
    if (sscanf(msg, "ok %u%c", &got, &end) == 1) {
        *route = got;
        return 0;
    }
    snprintf(why, len, "%.*s", (int)len - 1, strncmp(msg, "no ", 3) == 0 ? msg + 3
                                                                        : "refused by the service");
    return -1;
}

/* The target's user, when its line names one: groups, group, then user. */
static int become(const struct serve_target *t, char *why, size_t len)
{
    if (!t->user[0])
        return 0;
    struct passwd *pw = getpwnam(t->user);
    if (!pw)
        return snprintf(why, len, "user %s: no such user", t->user), -1;
    if (getuid() == pw->pw_uid && geteuid() == pw->pw_uid)
        return 0;   /* the service's own */
    if (initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 ||
        setuid(pw->pw_uid) != 0)
        return snprintf(why, len, "user %s: cannot become it: %s", t->user, strerror(errno)),
               -1;
    if (pw->pw_uid != 0 && setuid(0) == 0)
        return snprintf(why, len, "user %s: root could be taken back", t->user), -1;
    return 0;
}

/* The receiving weir's words for the target: -I (taken by the admitted
 * connection below), then -o PATH expanded or -- COMMAND. */
static int target_words(const struct serve_target *t, char **argv, char *path, size_t plen,
                        char *why, size_t wlen)
{
    int n = 0;
    argv[n++] = "weir";
    argv[n++] = "-I";
    argv[n++] = "1";
    if (t->output) {
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || strftime(path, plen, t->output, &tm) == 0)
            return snprintf(why, wlen, "-o %s: the name is empty or too long", t->output), -1;
        argv[n++] = "-o";
        argv[n++] = path;
    } else {
        argv[n++] = "--";
        for (int i = 0; t->command[i] && n < SERVE_ARGS_MAX - 1; i++)
            argv[n++] = t->command[i];
    }
    argv[n] = NULL;
    return n;
}

/* Run the engine from the admitted connection into the target; a sender
 * that comes back arrives on handoff (-1: it cannot), giving route. */
static int run_target(const struct serve_child *c, const struct serve_target *t,
                      struct listener_admitted *a, int handoff, uint32_t route,
                      uint64_t *bytes)
{
    char *argv[SERVE_ARGS_MAX];
    char path[4096], why[300];
    struct weir_options o;
    struct weir_error err;
    int argc = target_words(t, argv, path, sizeof path, why, sizeof why);
    if (argc < 0 || options_parse(argc, argv, &o, &err)) {
        if (argc >= 0)
            snprintf(why, sizeof why, "%.299s", err.msg);
        log_msg(c->log, LOG_ERROR, "client %s target %s: %s", t->client, t->name, why);
        refuse(a, "the service could not start the target");
        if (handoff >= 0)
            close(handoff);
        return argc < 0 ? WEIR_EXIT_USAGE : err.status;
    }
    o.quiet = c->log->quiet;
    struct weir_config cfg;
    options_to_config(&o, &cfg);
    cfg.tcp.listen_port[0] = 0;
    cfg.admitted = a;
    cfg.listen_fd = handoff;   /* the engine's from here on */
    cfg.listen_handoff = handoff >= 0;
    cfg.route = route;
    cfg.admit_tls = c->tls;
    struct weir_engine *e = NULL;
    if (weir_signals_block(&err) || weir_create(&cfg, c->log, &e, &err)) {
        log_msg(c->log, LOG_ERROR, "client %s target %s: %s", t->client, t->name, err.msg);
        if (a->t.ops)
            refuse(a, err.msg);
        return err.status;
    }
    int status = weir_run(e, NULL);
    struct stats_snapshot s;
    weir_snapshot(e, &s);
    *bytes = s.data_bytes;
    weir_destroy(e);
    return status;
}

/* This process's signals as a weir's: the service's handlers go, then
 * what the service blocked around the fork is taken. */
static void plain_signals(const sigset_t *mask)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    int sigs[] = {SIGCHLD, SIGHUP, SIGTERM, SIGINT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        (void)sigaction(sigs[i], &sa, NULL);
    sync_sigmask(SIG_SETMASK, mask);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sync_sigmask(SIG_UNBLOCK, &set);
}

int serve_transfer(const struct serve_child *c)
{
    plain_signals(c->mask);
    struct listener_admitted *a = calloc(1, sizeof *a);
    if (!a)
        return WEIR_EXIT_INTERNAL;
    /* the connections of a sender that comes back arrive on (a copy of) the
     * service's socket, which the listener closes unless the session may
     * resume */
    struct tcp_listener l = {.fd = fcntl(c->control, F_DUPFD_CLOEXEC, 0), .handoff = true};
    snprintf(l.addr, sizeof l.addr, "%s", c->peer);
    struct listener_config cfg = {.tls = c->tls, .serve = true, .channel_fd = c->conn,
                                  .channel_greeted = true, .channel_name = c->peer,
                                  .resume = l.fd >= 0, .streams = l.fd >= 0,
                                  .handshake_timeout = LISTENER_HANDSHAKE_SECS};
    atomic_bool stop = false;
    struct weir_error err;
    if (listener_admit(&l, &cfg, &stop, c->log, &a->t, a->ahead, &a->nahead, &a->peer, &err)) {
        tcp_listener_close(&l);
        return free(a), WEIR_EXIT_NETWORK;   /* the listener said why */
    }
    const struct serve_target *t = serve_conf_find(c->conf, a->peer.identity, a->peer.target);
    char why[300];
    uint32_t route = 0;
    if (!t)
        snprintf(why, sizeof why, "client %s has no target %s%s here", a->peer.identity,
                 a->peer.target[0] ? "named " : "", a->peer.target);
    if (!t || claim(c, t, &route, why, sizeof why) || become(t, why, sizeof why)) {
        if (t)
            log_msg(c->log, LOG_WARN, "refused %s (client %s target %s): %s", c->peer,
                    t->client, t->name, why);
        else
            log_msg(c->log, LOG_WARN, "refused %s: %s", c->peer, why);
        refuse(a, why);
        tcp_listener_close(&l);
        return free(a), WEIR_EXIT_NETWORK;
    }
    double start = clock_now();
    uint64_t bytes = 0;
    int status = run_target(c, t, a, l.fd, route, &bytes);
    char msg[SERVE_MSG_MAX];
    int n = snprintf(msg, sizeof msg, "end %llu %.3f %d", (unsigned long long)bytes,
                     clock_now() - start, status);
    (void)send(c->control, msg, (size_t)n, 0);
    free(a);
    return status;
}
