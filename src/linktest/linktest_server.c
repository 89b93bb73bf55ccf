/* linktest_server.c - the listener's side of a link test.  See
 * src/linktest/linktest.h; what both sides share is in linktest.c.
 *
 * The listener's thread (the reader, in listener_admit) calls start, join,
 * reap and free; the test runs on the server's thread, and its data on one
 * thread per connection.  lock guards what both see: whether a test runs,
 * the data connections' descriptors as they join, and whether the control
 * connection is still open (so that free may shut it down under a thread
 * that is stuck writing to a tester that does not read). */
#include "linktest/linktest.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/sync.h"
#include "linktest/linktest_int.h"
#include "os/os.h"

#define STOP_GRACE 1.0   /* seconds a stopped test has to tell its tester */

struct linktest_server {
    struct weir_log *log;
    pthread_mutex_t lock;
    /* under lock */
    bool running;              /* a test's thread was started and not yet joined */
    bool finished;             /* that thread is done */
    bool accepting;            /* its data connections may join */
    bool ctl_closed;           /* its control connection is closed */
    int joined;
    char stop_why[200];
    /* the test's thread */
    pthread_t thread;
    atomic_bool stop;
    struct lt_ctl ctl;
    char peer[80];
    char key_id[80];
    struct sockaddr_storage peer_addr;
    uint64_t test;
    unsigned char secret[LINKTEST_SECRET_SIZE];
    unsigned char keyless[CODEC_TOKEN_SIZE];   /* without a key: the secret, as sent */
    bool keyed;
    int parallel;
    uint32_t size_max;
    uint32_t step;
    bool peer_said;            /* the tester sent its 'S': no answer owed */
    unsigned char *junk;
    struct lt_flows out, in;   /* the tester's directions: out arrives here, in leaves */
};

int linktest_server_new(struct linktest_server **out, struct weir_log *log,
                        struct weir_error *err)
{
    struct linktest_server *s = calloc(1, sizeof *s);
    if (!s)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "link test");
    s->log = log;
    sync_mutex_init(&s->lock);
    atomic_init(&s->stop, false);
    *out = s;
    return 0;
}

static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr)) == 0;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return false;
}

/* ---- the test's thread -------------------------------------------------------- */

static int stopped(struct linktest_server *s, struct weir_error *err)
{
    sync_lock(&s->lock);
    error_set(err, WEIR_EXIT_NETWORK, "%s: stopped: %s", s->ctl.t.name, s->stop_why);
    sync_unlock(&s->lock);
    return -1;
}

static int tester_said(struct linktest_server *s, const struct codec_record *r,
                       struct weir_error *err)
{
    s->peer_said = true;
    return error_set(err, r->code ? r->code : WEIR_EXIT_NETWORK, "%s: the tester gave up: %s",
                     s->ctl.t.name, r->msg);
}

static int broke(struct linktest_server *s, const struct codec_record *r, const char *when,
                 struct weir_error *err)
{
    if (r->type == 'S')
        return tester_said(s, r, err);
    if (r->type == 'L')
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the tester broke the conversation ('%c' "
                         "%s)", s->ctl.t.name, r->link.op, when);
    return error_set(err, WEIR_EXIT_NETWORK, "%s: the tester broke the conversation ('%c' "
                     "record %s)", s->ctl.t.name, r->type, when);
}

static int check_flows(struct linktest_server *s, struct weir_error *err)
{
    char why[WEIR_ERROR_MAX];
    if (lt_flows_failed(&s->out, why, sizeof why) || lt_flows_failed(&s->in, why, sizeof why))
        return error_set(err, WEIR_EXIT_NETWORK, "%s: %s", s->ctl.t.name, why);
    return 0;
}

/* One record from the tester within secs. */
static int hear(struct linktest_server *s, struct codec_record *r, double secs,
                struct weir_error *err)
{
    double until = clock_now() + secs;
    for (;;) {
        if (atomic_load(&s->stop))
            return stopped(s, err);
        double left = until - clock_now();
        if (left <= 0)
            return error_set(err, WEIR_EXIT_NETWORK, "%s: the tester said nothing for %g s",
                             s->ctl.t.name, secs);
        int got = lt_recv(&s->ctl, left * 1000 > LT_SLICE_MS ? LT_SLICE_MS : (int)(left * 1000),
                          r, err);
        if (got < 0)
            return atomic_load(&s->stop) ? stopped(s, err) : -1;
        if (got > 0)
            return 0;
    }
}

static int send_link(struct linktest_server *s, const struct codec_link *l,
                     struct weir_error *err)
{
    if (lt_send(&s->ctl, l, err))
        return atomic_load(&s->stop) ? stopped(s, err) : -1;
    return 0;
}

/* WELCOME, then every data connection joins (through the listener), then
 * READY. */
static int gather(struct linktest_server *s, struct weir_error *err)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct codec_link w = {.op = CODEC_LINK_WELCOME, .n = cpus > 0 ? (uint32_t)cpus : 1,
                           .a = s->test};
    if (!s->keyed)
        memcpy(w.token, s->keyless, sizeof w.token);
    int rc = send_link(s, &w, err);
    OPENSSL_cleanse(w.token, sizeof w.token);
    if (rc)
        return -1;
    double until = clock_now() + LINKTEST_SILENCE;
    for (;;) {
        sync_lock(&s->lock);
        int joined = s->joined;
        sync_unlock(&s->lock);
        if (joined == 2 * s->parallel)
            break;
        if (atomic_load(&s->stop))
            return stopped(s, err);
        if (clock_now() > until)
            return error_set(err, WEIR_EXIT_NETWORK, "%s: its data connections did not all "
                             "join within %g s (%d of %d)", s->ctl.t.name, LINKTEST_SILENCE,
                             joined, 2 * s->parallel);
        struct codec_record r;
        int got = lt_recv(&s->ctl, 10, &r, err);
        if (got < 0)
            return atomic_load(&s->stop) ? stopped(s, err) : -1;
        if (got > 0)
            return broke(s, &r, "while its data connections joined", err);
    }
    /* no more joins: the flows are this thread's now */
    sync_lock(&s->lock);
    s->accepting = false;
    sync_unlock(&s->lock);
    struct lt_flows *sets[2] = {&s->out, &s->in};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < sets[k]->n; i++) {
            int zero = 0;   /* writes of the size measured, as the tester's are */
            if (setsockopt(sets[k]->flow[i].fd, IPPROTO_TCP, TCP_NODELAY, &zero,
                           sizeof zero) != 0)
                return error_sys(err, WEIR_EXIT_NETWORK, errno, "%s: data connection: "
                                 "setsockopt", s->ctl.t.name);
        }
    if (lt_flows_start(&s->out, err) || lt_flows_start(&s->in, err))
        return -1;
    struct codec_link ready = {.op = CODEC_LINK_READY};
    return send_link(s, &ready, err);
}

/* What one measurement has seen so far. */
struct measurement {
    bool sent, heard, arrived;
    uint64_t tester_sent, bytes;
    double secs;
};

/* The measurement ran out of time: say which part never came. */
static int measurement_late(struct linktest_server *s, const struct measurement *ms,
                            struct weir_error *err)
{
    if (ms->heard)
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the tester's data stopped "
                         "arriving (%llu of the %llu bytes it sent)", s->ctl.t.name,
                         (unsigned long long)lt_flows_arrived(&s->out),
                         (unsigned long long)ms->tester_sent);
    return error_set(err, WEIR_EXIT_NETWORK, "%s: the tester did not finish a "
                     "measurement within %g s of its end", s->ctl.t.name, LINKTEST_SILENCE);
}

/* One turn of a measurement: say SENT once our flows are done, see whether
 * the tester's bytes are all in, and take its SENT from the control
 * connection. */
static int measurement_turn(struct linktest_server *s, struct measurement *ms,
                            struct weir_error *err)
{
    uint64_t total;
    if (!ms->sent && lt_flows_sent(&s->in, &total)) {
        struct codec_link done = {.op = CODEC_LINK_SENT, .n = s->step, .a = total};
        if (send_link(s, &done, err))
            return -1;
        ms->sent = true;
    }
    if (ms->heard && !ms->arrived) {
        int all = lt_flows_all_in(&s->out, ms->tester_sent, s->ctl.t.name, "tester",
                                  &ms->secs, &ms->bytes, err);
        if (all < 0)
            return -1;
        if (all > 0) {
            ms->arrived = true;
            return 0;
        }
    }
    struct codec_record r;
    int got = lt_recv(&s->ctl, LT_POLL_MS, &r, err);
    if (got < 0)
        return atomic_load(&s->stop) ? stopped(s, err) : -1;
    if (got == 0)
        return 0;
    if (r.type == 'L' && r.link.op == CODEC_LINK_SENT && r.link.n == s->step && !ms->heard) {
        ms->heard = true;
        ms->tester_sent = r.link.a;
        return 0;
    }
    return broke(s, &r, "during a measurement", err);
}

/* One measurement, as RUN asks: the senders of this end for the duration,
 * SENT, then what arrived from the tester, and MEASURED. */
static int measure(struct linktest_server *s, const struct codec_link *run,
                   struct weir_error *err)
{
    uint32_t size = (uint32_t)run->a;
    double duration = (double)run->b / 1e6;
    if (run->n != s->step || run->a < LINKTEST_SIZE_MIN || run->a > s->size_max ||
        duration < LINKTEST_DURATION_MIN || duration > LINKTEST_DURATION_MAX)
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the tester asked for a measurement "
                         "out of bounds (number %u, %llu-byte writes for %g s)", s->ctl.t.name,
                         run->n, (unsigned long long)run->a, duration);
    bool out = run->dir != CODEC_LINK_IN, in = run->dir != CODEC_LINK_OUT;
    if (out)
        atomic_store(&s->out.read_size, size < LINKTEST_READ_MAX ? size : LINKTEST_READ_MAX);
    double t0 = clock_now(), cpu0 = lt_cpu_secs();
    if (in)
        lt_flows_send(&s->in, size, duration);
    struct measurement ms = {.sent = !in, .heard = !out, .arrived = !out};
    double until = t0 + duration + LINKTEST_SILENCE;
    while (!ms.sent || !ms.arrived) {
        if (atomic_load(&s->stop))
            return stopped(s, err);
        if (check_flows(s, err))
            return -1;
        if (clock_now() > until)
            return measurement_late(s, &ms, err);
        if (measurement_turn(s, &ms, err))
            return -1;
    }
    double wall = clock_now() - t0;
    double cpu = wall > 0 ? (lt_cpu_secs() - cpu0) / wall : 0;
    struct codec_link m = {.op = CODEC_LINK_MEASURED, .n = s->step, .a = ms.bytes,
                           .b = (uint64_t)(ms.secs * 1e9), .c = (uint64_t)(cpu * 1000 + 0.5)};
    s->step++;
    return send_link(s, &m, err);
}

static int converse(struct linktest_server *s, struct weir_error *err)
{
    if (gather(s, err))
        return -1;
    for (;;) {
        struct codec_record r;
        if (hear(s, &r, LINKTEST_SILENCE, err))
            return -1;
        if (r.type != 'L')
            return broke(s, &r, "between measurements", err);
        if (r.link.op == CODEC_LINK_PING) {
            struct codec_link pong = {.op = CODEC_LINK_PONG, .n = r.link.n, .a = r.link.a};
            if (send_link(s, &pong, err))
                return -1;
        } else if (r.link.op == CODEC_LINK_RUN) {
            if (measure(s, &r.link, err))
                return -1;
        } else if (r.link.op == CODEC_LINK_END) {
            struct codec_link end = {.op = CODEC_LINK_END};
            return send_link(s, &end, err);
        } else {
            return broke(s, &r, "between measurements", err);
        }
    }
}

static void *serve(void *arg)
{
    struct linktest_server *s = arg;
    struct weir_error err;
    int rc = converse(s, &err);
    if (rc == 0) {
        log_msg(s->log, LOG_INFO, "%s: done (%u measurements); still listening",
                s->ctl.t.name, s->step);
    } else if (atomic_load(&s->stop)) {
        sync_lock(&s->lock);
        char why[sizeof s->stop_why];
        snprintf(why, sizeof why, "%s", s->stop_why);
        sync_unlock(&s->lock);
        lt_send_status(&s->ctl, WEIR_EXIT_NETWORK, why);
        log_msg(s->log, LOG_INFO, "%s: stopped: %s", s->ctl.t.name, why);
    } else {
        if (!s->peer_said)
            lt_send_status(&s->ctl, err.status, err.msg);
        log_msg(s->log, LOG_WARN, "%s; still listening", err.msg);
    }
    sync_lock(&s->lock);
    s->accepting = false;
    sync_unlock(&s->lock);
    lt_flows_stop(&s->out);
    lt_flows_stop(&s->in);
    sync_lock(&s->lock);
    s->ctl_closed = true;
    sync_unlock(&s->lock);
    struct weir_error ignored;
    transport_close(&s->ctl.t, rc == 0, NULL, &ignored);
    OPENSSL_cleanse(s->secret, sizeof s->secret);
    OPENSSL_cleanse(s->keyless, sizeof s->keyless);
    sync_lock(&s->lock);
    s->finished = true;
    sync_unlock(&s->lock);
    return NULL;
}

/* ---- the listener's side ------------------------------------------------------ */

void linktest_server_reap(struct linktest_server *s)
{
    if (!s)
        return;
    sync_lock(&s->lock);
    bool done = s->running && s->finished;
    sync_unlock(&s->lock);
    if (!done)
        return;
    sync_join(s->thread);
    sync_lock(&s->lock);
    s->running = false;
    sync_unlock(&s->lock);
}

/* Refuse a tester whose connection was handed over: tell it, close it. */
static int refuse(struct transport *control, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int refuse(struct transport *control, char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    struct lt_ctl c = {.t = *control};
    lt_send_status(&c, WEIR_EXIT_NETWORK, why);
    struct weir_error ignored;
    transport_close(&c.t, true, NULL, &ignored);   /* it read all it was sent: a FIN */
    transport_none(control);
    return -1;
}

/* Whether a tester's hello asks for more than this listener serves. */
static bool beyond_bounds(const struct codec_link *hello)
{
    double duration = (double)hello->a / 1e6;
    return hello->n < 1 || hello->n > LINKTEST_PARALLEL_MAX || duration < LINKTEST_DURATION_MIN ||
           duration > LINKTEST_DURATION_MAX || hello->b < LINKTEST_SIZE_MIN ||
           hello->b > LINKTEST_SIZE_MAX || hello->c < 1 || hello->c > LINKTEST_SIZES_MAX;
}

/* The test takes the tester's connection over, and is marked running. */
static void take_control(struct linktest_server *s, struct transport *control,
                         const char *peer_name)
{
    memset(&s->ctl, 0, sizeof s->ctl);
    s->ctl.t = *control;
    transport_none(control);
    snprintf(s->ctl.t.name, sizeof s->ctl.t.name, "link test from %s", peer_name);
    s->ctl.stop = &s->stop;
    atomic_store(&s->stop, false);
    sync_lock(&s->lock);
    s->running = true;
    s->finished = false;
    s->accepting = true;
    s->ctl_closed = false;
    s->joined = 0;
    s->stop_why[0] = '\0';
    sync_unlock(&s->lock);
}

int linktest_server_start(struct linktest_server *s, struct transport *control,
                          const struct codec_link *hello, const unsigned char *secret,
                          const struct sockaddr_storage *peer, const char *peer_name,
                          const char *key_id, char *why, size_t whylen)
{
    linktest_server_reap(s);
    if (s->running)
        return refuse(control, why, whylen, "busy: another link test is under way; try "
                      "again when it is over");   /* never whose: a tester may be anyone */
    double duration = (double)hello->a / 1e6;
    if (beyond_bounds(hello))
        return refuse(control, why, whylen, "it asked for a test beyond this listener's bounds "
                      "(%u connections each way, %g s a measurement, writes of up to %llu "
                      "bytes; at most %d, %g s and %u)", hello->n, duration,
                      (unsigned long long)hello->b, LINKTEST_PARALLEL_MAX,
                      LINKTEST_DURATION_MAX, LINKTEST_SIZE_MAX);
    struct weir_error err;
    if (!s->junk && !(s->junk = lt_junk()))
        return refuse(control, why, whylen, "this listener is out of memory");
    unsigned char id[8];
    s->keyed = secret != NULL;
    if (RAND_bytes(id, sizeof id) != 1 ||
        (!s->keyed && RAND_bytes(s->keyless, sizeof s->keyless) != 1))
        return refuse(control, why, whylen, "this listener has no random numbers");
    s->test = codec_get64(id);
    if (s->keyed)
        memcpy(s->secret, secret, LINKTEST_SECRET_SIZE);
    else
        lt_keyless_secret(s->keyless, s->secret);
    s->parallel = (int)hello->n;
    s->size_max = (uint32_t)hello->b;
    s->step = 0;
    s->peer_said = false;
    s->peer_addr = *peer;
    snprintf(s->peer, sizeof s->peer, "%s", peer_name);
    snprintf(s->key_id, sizeof s->key_id, "%s", key_id ? key_id : "");
    if (lt_flows_init(&s->out, false, CODEC_LINK_OUT, s->parallel, s->junk, &err) ||
        lt_flows_init(&s->in, true, CODEC_LINK_IN, s->parallel, s->junk, &err)) {
        lt_flows_stop(&s->out);
        lt_flows_stop(&s->in);
        return refuse(control, why, whylen, "this listener is out of memory");
    }
    take_control(s, control, peer_name);
    if (sync_create(&s->thread, serve, s, &err)) {
        sync_lock(&s->lock);
        s->running = false;
        sync_unlock(&s->lock);
        lt_flows_stop(&s->out);
        lt_flows_stop(&s->in);
        return refuse(&s->ctl.t, why, whylen, "this listener cannot start a thread");
    }
    log_msg(s->log, LOG_INFO, "link test from %s: serving it (%d connection%s each way, %g s "
            "a measurement, %s%s%s)", peer_name, s->parallel, s->parallel == 1 ? "" : "s",
            duration, s->keyed ? "the key '" : "without a key", s->keyed ? s->key_id : "",
            s->keyed ? "'" : "");
    return 0;
}

int linktest_server_join(struct linktest_server *s, int fd, const struct codec_link *join,
                         const struct sockaddr_storage *peer, char *why, size_t whylen)
{
    int rc = -1;
    unsigned char token[CODEC_TOKEN_SIZE];
    sync_lock(&s->lock);
    struct lt_flows *set = join->dir == CODEC_LINK_OUT ? &s->out : &s->in;
    /* the flows are looked at only while accepting: then they are there */
    if (!s->running || s->finished)
        snprintf(why, whylen, "a data connection of a link test, and none is under way");
    else if (join->a != s->test)
        snprintf(why, whylen, "a data connection of another link test");
    else if (!same_ip(peer, &s->peer_addr))
        snprintf(why, whylen, "a data connection of a link test from another address");
    else if (join->n >= (uint32_t)s->parallel)
        snprintf(why, whylen, "a data connection the link test does not have");
    else if (!s->accepting || set->flow[join->n].fd >= 0)
        snprintf(why, whylen, "a data connection of a link test that joined already");
    else if (linktest_token(s->secret, s->test, join->dir, join->n, token) ||
             CRYPTO_memcmp(token, join->token, sizeof token) != 0)
        snprintf(why, whylen, "a data connection of a link test with a wrong token");
    else
        rc = 0;
    if (rc == 0) {
        unsigned char rec[CODEC_LINK_SIZE];
        struct codec_link echo = {.op = CODEC_LINK_JOIN, .dir = join->dir, .n = join->n,
                                  .a = join->a};
        codec_link(rec, &echo);
        /* a fresh connection has room for it */
        if (os_send(fd, rec, sizeof rec, true) != (ssize_t)sizeof rec) {
            snprintf(why, whylen, "a data connection of a link test that does not read");
            rc = -1;
        } else {
            set->flow[join->n].fd = fd;
            s->joined++;
        }
    }
    sync_unlock(&s->lock);
    OPENSSL_cleanse(token, sizeof token);
    return rc;
}

void linktest_server_free(struct linktest_server *s, const char *why)
{
    if (!s)
        return;
    linktest_server_reap(s);
    sync_lock(&s->lock);
    bool running = s->running;
    if (running) {
        snprintf(s->stop_why, sizeof s->stop_why, "%s", why);
        atomic_store(&s->stop, true);
    }
    sync_unlock(&s->lock);
    if (running) {
        /* it tells its tester why, unless that tester does not read */
        double until = clock_now() + STOP_GRACE;
        for (;;) {
            sync_lock(&s->lock);
            bool done = s->finished;
            if (!done && clock_now() >= until && !s->ctl_closed)
                (void)shutdown(s->ctl.t.fd, SHUT_RDWR);   /* its writes fail at once */
            sync_unlock(&s->lock);
            if (done || clock_now() >= until)
                break;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        sync_join(s->thread);
    }
    free(s->junk);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The service as a listener takes it (listener.h): the same five, on the
 * server's state as the listener holds it, without knowing its type. */
static int service_create(void **server, struct weir_log *log, struct weir_error *err)
{
    struct linktest_server *s = NULL;
    int rc = linktest_server_new(&s, log, err);
    *server = s;
    return rc;
}

static int service_start(void *server, struct transport *control,
                         const struct codec_link *hello, const unsigned char *secret,
                         const struct sockaddr_storage *peer, const char *peer_name,
                         const char *key_id, char *why, size_t whylen)
{
    return linktest_server_start(server, control, hello, secret, peer, peer_name, key_id, why,
                                 whylen);
}

static int service_join(void *server, int fd, const struct codec_link *join,
                        const struct sockaddr_storage *peer, char *why, size_t whylen)
{
    return linktest_server_join(server, fd, join, peer, why, whylen);
}

static void service_reap(void *server)
{
    linktest_server_reap(server);
}

static void service_destroy(void *server, const char *why)
{
    linktest_server_free(server, why);
}

const struct listener_tests *linktest_server_service(void)
{
    static const struct listener_tests service = {
        .create = service_create,
        .start = service_start,
        .join = service_join,
        .reap = service_reap,
        .destroy = service_destroy,
    };
    return &service;
}
