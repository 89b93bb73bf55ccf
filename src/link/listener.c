/* listener.c - see listener.h. */
#include "link/listener.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/sync.h"
#include "crypto/secret.h"
#include "os/os.h"

/* One place beyond the cap: a newcomer waits there while a waiting
 * connection that proved itself as room was made for it is admitted
 * (make_room).  During a gathering the newcomer may be the sender's own. */
#define PENDING_PLACES (LISTENER_PENDING + 1)

#define PENDING_BUF 2048   /* a greeting and a header, or the first sealed record */
#define FIRST_RECORD_MAX 512   /* the sealed header record, with room to spare */

/* A connection that has not proven itself yet. */
struct pending {
    int fd;                    /* -1: a free entry */
    char peer[80];
    struct sockaddr_storage addr;
    double since;              /* when it was accepted: the oldest goes first */
    double deadline;           /* when it is dropped for saying too little */
    enum {
        AWAIT_GREETING,        /* the sender's 'G' */
        AWAIT_HEADER,          /* then, without a key, the stream header */
        AWAIT_LINK,            /* a link tester without a key: its request or join */
        IN_HANDSHAKE,          /* or, with one, the TLS handshake */
        AWAIT_RECORD,          /* and the header (a tester: its request) in the
                                  first sealed record */
    } state;
    unsigned char buf[PENDING_BUF];
    size_t have;
    bool plain;                /* admitted as plain bytes (plain_too) */
    bool unmarked;             /* plain_too: its SYN had no weir mark, so it is never
                                  greeted and what it sends is plain bytes */
    bool trusted;              /* the ssh channel: its sender has no key, and needs none */
    uint64_t received;         /* every byte read from it, the handshake's too */
    double heard;              /* when the last of them came */
    struct tls_handshake *tls;
    struct pending_secrets *sec;   /* with tls: secret memory (secret.h) */
    bool tester;               /* it greeted as a link tester (role 'T') */
    uint32_t features;         /* what its greeting offers */
    bool rejoin;               /* its first record asks to resume a session ('R') */
    bool join;                 /* its first record joins the session under way ('J') */
    unsigned join_index, join_count;
    char target[CODEC_TARGET_MAX + 1];   /* a service's: the target it asked for */
    bool placed;               /* it sent a target record ('P') */
};

/* What a waiting connection's handshake yields. */
struct pending_secrets {
    struct seal_session keys;
    unsigned char secret[LINKTEST_SECRET_SIZE];   /* a keyed tester's */
};

struct admission {
    struct tcp_listener *l;
    const struct listener_config *cfg;
    struct weir_log *log;
    struct pending conn[PENDING_PLACES];
    int count;
    void *lt;                     /* link tests served meanwhile; NULL until the first */
    /* the refusal log is bounded: a flood must not fill a -l file */
    double log_second;          /* the second being counted */
    unsigned logged, unlogged;  /* refusals logged and left out in it */
    int tick_ms;                /* how often a wait looks at the stop flag */
};

/* Log one line about a waiting connection (a refusal, a newcomer), at
 * most LOG_PER_SECOND a second, on the terminal and in a -l file alike:
 * the rest are counted and said in one line with the next second's first.
 * Lines of a level that goes nowhere are not counted. */
#define LOG_PER_SECOND 10
#define ACCEPT_BATCH 8   /* connections accepted before the waiting ones are heard again */

static void bounded(struct admission *a, enum log_level level, const char *fmt, const char *peer,
                    const char *why)
{
    if (!log_enabled(a->log, level))
        return;
    double now = clock_now();
    if (now - a->log_second >= 1.0) {
        if (a->unlogged > 0)
            log_msg(a->log, LOG_WARN, "... and %u more lines about connections (refused, "
                    "dropped or waiting) left out in that second", a->unlogged);
        a->log_second = now;
        a->logged = a->unlogged = 0;
    }
    if (a->logged++ < LOG_PER_SECOND)
        log_msg(a->log, level, fmt, peer, why);
    else
        a->unlogged++;
}

static void refusal(struct admission *a, const char *fmt, const char *peer, const char *why)
{
    bounded(a, LOG_WARN, fmt, peer, why);
}

/* A waiting connection's TLS handshake and the secret memory for what it
 * yields: 0, or -1 with err. */
static int start_handshake(struct admission *a, struct pending *c, struct weir_error *err)
{
    c->sec = secret_alloc(sizeof *c->sec);
    if (!c->sec)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "secret memory");
    return tls_handshake_new(&c->tls, a->cfg->tls, err);
}

/* Its end: the handshake and the secrets go, wiped. */
static void forget_handshake(struct pending *c)
{
    tls_handshake_free(c->tls);
    c->tls = NULL;
    secret_free(c->sec, sizeof *c->sec);
    c->sec = NULL;
}

/* Tell a peer that may be a weir sender why it is refused, in an answer it
 * reads in place of a greeting or after it; a --raw listener never writes. */
static void send_refusal(int fd, const char *msg)
{
    unsigned char rec[CODEC_RECORD_MAX];
    size_t n = codec_status(rec, WEIR_EXIT_NETWORK, 0, 0, msg);
    (void)os_send(fd, rec, n, true);   /* best effort */
}

static void tell(struct admission *a, int fd, const char *msg)
{
    if (!a->cfg->raw)
        send_refusal(fd, msg);
}

/* After a refusal: what the peer sent and nobody read would turn the close
 * into a reset, which can take the answer away before it is read (a keyless
 * joiner sends its greeting and 'J' before it reads anything). */
static void end_refused(int fd)
{
    char junk[4096];
    for (int i = 0; i < 16 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++)
        ;
    (void)shutdown(fd, SHUT_WR);
}

/* Refuse a waiting connection: log why (fmt, NULL: silently), tell the
 * peer told (a peer in TLS would not read it), and close. */
static void drop_telling(struct admission *a, struct pending *c, const char *fmt,
                         const char *why, const char *told)
{
    if (fmt) {
        refusal(a, fmt, c->peer, why);
        if (c->state < IN_HANDSHAKE) {
            tell(a, c->fd, told);
            end_refused(c->fd);
        }
    }
    forget_handshake(c);
    close(c->fd);
    c->fd = -1;
    a->count--;
}

static void drop(struct admission *a, struct pending *c, const char *fmt, const char *why)
{
    drop_telling(a, c, fmt, why, why);
}

/* A waiting connection was handed over (to a link test): its entry goes,
 * its descriptor does not. */
static void release(struct admission *a, struct pending *c)
{
    forget_handshake(c);
    c->fd = -1;
    a->count--;
}

static bool same_address(const struct sockaddr_storage *x, const struct sockaddr_storage *y)
{
    if (x->ss_family != y->ss_family)
        return false;
    if (x->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)x)->sin_addr,
                      &((const struct sockaddr_in *)y)->sin_addr, sizeof(struct in_addr)) == 0;
    if (x->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
                      &((const struct sockaddr_in6 *)y)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return false;
}

/* A new connection is not quiet yet for this long: a weir sender speaks
 * only once the receiver's greeting reached it, one round trip and a busy
 * host's scheduling later. */
#define LISTENER_GRACE_SECS 1.0

/* Since when a waiting connection has been quiet: its last byte, or, when
 * it has sent none, a grace after it was accepted. */
static double quiet_since(const struct pending *c)
{
    return c->received > 0 ? c->heard : c->since + LISTENER_GRACE_SECS;
}

/* Which waiting connection goes first (from addr when it is given): the
 * one quiet the longest.  A sender speaks within a round trip of the
 * greeting and goes on speaking until it is admitted, so it is never quiet
 * for long; a crowd, silent or stalled in its greeting, only waits, and a
 * churn of half greetings does not push out a sender still reading ours. */
static struct pending *oldest(struct admission *a, const struct sockaddr_storage *addr,
                              int *from_addr)
{
    struct pending *old = NULL;
    *from_addr = 0;
    for (int i = 0; i < PENDING_PLACES; i++) {
        struct pending *c = &a->conn[i];
        if (c->fd < 0 || (addr && !same_address(&c->addr, addr)))
            continue;
        (*from_addr)++;
        if (!old || quiet_since(c) < quiet_since(old))
            old = c;
    }
    return old;
}

static int hear(struct admission *a, struct pending *c);

/* Drop the connection that goes first (from addr when given), after
 * hearing it once more: what it sent may have arrived since the last look,
 * and may even admit it.  Returns it when it was admitted. */
static struct pending *evict(struct admission *a, const struct sockaddr_storage *addr,
                             const char *why)
{
    for (;;) {
        int n;
        struct pending *old = oldest(a, addr, &n);
        if (!old || (addr && n < LISTENER_PER_ADDRESS) || (!addr && a->count < LISTENER_PENDING))
            return NULL;
        uint64_t had = old->received;
        int r = hear(a, old);
        if (r == 1)
            return old;
        if (r < 0 || old->received != had)
            continue;   /* it went, or it spoke and is no longer first to go */
        drop(a, old, "dropped connection from %s: %s", why);
    }
}

/* Make room for a connection from addr: the cap per address first, then the
 * cap on all of them.  The one that goes is never the newcomer: a real
 * sender proves itself within a round trip, a crowd only waits.  *won is a
 * waiting connection that proved itself meanwhile; it still holds its
 * place until it is admitted, and the newcomer takes the one beyond the
 * cap (PENDING_PLACES), so that it is never closed for it. */
static struct pending *make_room(struct admission *a, const struct sockaddr_storage *addr,
                                 struct pending **won)
{
    *won = evict(a, addr, "too many unproven connections from that address; the oldest goes");
    if (!*won)
        *won = evict(a, NULL, "too many unproven connections; the oldest goes");
    for (int i = 0; i < PENDING_PLACES; i++)
        if (a->conn[i].fd < 0)
            return &a->conn[i];
    return NULL;   /* not reached: at most the cap waits, and there is a place more */
}

size_t listener_serve_greeting(unsigned char *out)
{
    return codec_greeting(out, CODEC_ROLE_RECEIVER, CODEC_FEATURES | CODEC_FEATURES_KEYED |
                                                        CODEC_FEATURE_RESUME |
                                                        CODEC_FEATURE_SERVE |
                                                        CODEC_FEATURE_STREAMS |
                                                        CODEC_FEATURE_GROW);
}

static int greet(struct admission *a, int fd, bool trusted)
{
    unsigned char greeting[CODEC_GREETING_SIZE];
    if (a->l->handoff)
        return 0;   /* the service greeted it (listener_serve_greeting) */
    codec_greeting(greeting, CODEC_ROLE_RECEIVER,
                   CODEC_FEATURES | (a->cfg->tls && !trusted ? CODEC_FEATURES_KEYED : 0) |
                       ((a->cfg->tls || a->cfg->allow_link_test) && a->cfg->tests && !trusted
                            ? CODEC_FEATURE_LINKTEST : 0) |
                       (a->cfg->resume && (a->l->fd >= 0 || a->cfg->redials)
                            ? CODEC_FEATURE_RESUME : 0) |
                       (a->cfg->serve && a->cfg->tls ? CODEC_FEATURE_SERVE : 0) |
                       (a->cfg->streams && !a->cfg->serve && a->l->fd >= 0 && !trusted
                            ? CODEC_FEATURE_STREAMS | CODEC_FEATURE_GROW : 0));
    if (os_send(fd, greeting, sizeof greeting, true) ==
        (ssize_t)sizeof greeting)
        return 0;
    if (errno == 0)
        errno = EAGAIN;
    return -1;
}

/* The next connection of the listening socket, or one handed over (a
 * service's: tcp.h), with its peer's address; or -1 with errno. */
static int take_one(const struct tcp_listener *l, struct sockaddr_storage *ss)
{
    socklen_t slen = sizeof *ss;
    if (!l->handoff)
        return os_accept(l->fd, (struct sockaddr *)ss, &slen);
    int fd = tcp_take_fd(l->fd);
    if (fd >= 0 && getpeername(fd, (struct sockaddr *)ss, &slen) != 0)
        memset(ss, 0, sizeof *ss);
    return fd < 0 && errno == EBADMSG ? (errno = ECONNABORTED, -1) : fd;
}

/* Accept what waits on the listening socket, a batch at a time, so that
 * connections already waiting are heard in between.  0, or -1 with *err;
 * *won is a connection that proved itself meanwhile. */
static int accept_some(struct admission *a, struct pending **won, struct weir_error *err)
{
    *won = NULL;
    for (int batch = 0; batch < ACCEPT_BATCH; batch++) {
        struct sockaddr_storage ss;
        int fd = take_one(a->l, &ss);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 0;
            if (errno == ECONNABORTED || errno == EPROTO)
                continue;
            if ((errno == EMFILE || errno == ENFILE) && a->count > 0) {
                int n;
                drop(a, oldest(a, NULL, &n), "dropped connection from %s: %s",
                     "out of descriptors; an unproven connection goes");
                continue;
            }
            return error_sys(err, WEIR_EXIT_NETWORK, errno, "listen %s: accept", a->l->addr);
        }
        char peer[80];
        tcp_format_addr((struct sockaddr *)&ss, peer, sizeof peer);
        if (!tcp_peer_allowed(a->l, (struct sockaddr *)&ss)) {
            char why[300];
            snprintf(why, sizeof why, "only %s may connect", a->l->allow_name);
            refusal(a, "refused connection from %s: %s", peer, why);
            tell(a, fd, "refused: this receiver admits another address only");
            end_refused(fd);
            close(fd);
            continue;
        }
        /* plain_too: only a connection whose SYN bore weir's mark is
         * greeted; a plain sender never reads, and unread bytes would make
         * its close a reset (tcp.h) */
        bool unmarked = a->cfg->plain_too && !tcp_syn_marked(fd);
        if (tcp_tune(fd, a->cfg->io_timeout) != 0 ||
            (!a->cfg->raw && !unmarked && greet(a, fd, false) != 0)) {
            refusal(a, "dropped connection from %s: %s", peer, strerror(errno));
            close(fd);
            continue;
        }
        struct pending *c = make_room(a, &ss, won);
        double now = clock_now();
        /* a plain sender may take its time to send its first byte */
        double limit = a->cfg->raw || a->cfg->plain_too ? a->cfg->io_timeout
                                                        : a->cfg->handshake_timeout;
        *c = (struct pending){.fd = fd, .addr = ss, .since = now,
                              .deadline = limit > 0 ? now + limit : 0,
                              .unmarked = unmarked};
        snprintf(c->peer, sizeof c->peer, "%s", peer);
        a->count++;
        bounded(a, LOG_DEBUG, "connection from %s: waiting for it to %s", peer,
                "prove itself");
        if (*won)
            return 0;   /* admitted first; the newcomer waits beyond the cap meanwhile */
    }
    return 0;
}

/* What a peer that is not a weir sender began with, for the log. */
static void describe_start(const unsigned char *b, size_t n, char *out, size_t len)
{
    size_t j = 0;
    for (size_t i = 0; i < n && i < 24 && j + 2 < len; i++)
        out[j++] = b[i] >= 0x20 && b[i] < 0x7f ? (char)b[i] : '.';
    out[j] = '\0';
}

/* The sender's greeting says whether it has a key; both ends must agree. */
static int judge_keys(struct admission *a, struct pending *c, const struct codec_record *r,
                      struct weir_error *err)
{
    bool theirs = r->features & CODEC_FEATURE_KEY;
    if (c->trusted) {
        if (!theirs) {
            c->state = AWAIT_HEADER;
            return 0;
        }
        drop(a, c, "refused connection from %s: %s", "a sender with a key on the ssh channel");
        return -1;
    }
    if (a->cfg->tls && !theirs) {
        drop(a, c, "refused connection from %s: %s", "a sender without a key: this receiver "
             "takes only encrypted connections (give the sender --key-file)");
        return -1;
    }
    if (!a->cfg->tls && theirs) {
        drop(a, c, "refused connection from %s: %s", "a sender with a key: this receiver has "
             "none (give it --key-file)");
        return -1;
    }
    if (codec_keyed_older(r->features)) {
        drop(a, c, "refused connection from %s: %s", "a sender with a key: " CODEC_OLDER_KEYED);
        return -1;
    }
    if (!a->cfg->tls) {
        c->state = AWAIT_HEADER;
        return 0;
    }
    if (start_handshake(a, c, err)) {
        drop(a, c, "dropped connection from %s: %s", err->msg);
        return -1;
    }
    c->state = IN_HANDSHAKE;
    return 0;
}

/* The link test service's state, once a test made it: a test that is over
 * is joined; all end when the listener admits its sender or stops. */
static void tests_reap(struct admission *a)
{
    if (a->lt)
        a->cfg->tests->reap(a->lt);
}

static void tests_end(struct admission *a, const char *why)
{
    if (a->lt)
        a->cfg->tests->destroy(a->lt, why);
    a->lt = NULL;
}

/* A link tester asked for a test (hello): its connection goes to the link
 * test server, which serves the test beside this loop.  Keyed, the
 * connection carries sealed records, the first of which (the hello) was
 * opened here; rest: what arrived after it.  Returns -1: the connection
 * left the waiting set, served or refused. */
static int serve_tester(struct admission *a, struct pending *c, const struct codec_link *hello,
                        const unsigned char *rest, size_t nrest)
{
    struct weir_error err;
    if (!a->cfg->tests) {
        drop(a, c, "refused connection from %s: %s", "a link tester: this listener does not "
             "serve link tests");
        return -1;
    }
    if (!a->lt && a->cfg->tests->create(&a->lt, a->log, &err)) {
        drop(a, c, "dropped connection from %s: %s", err.msg);
        return -1;
    }
    bool keyed = c->state == AWAIT_RECORD;
    char name[120], why[WEIR_ERROR_MAX];
    snprintf(name, sizeof name, "link test from %s", c->peer);
    struct transport t;
    transport_tcp(&t, c->fd, name);
    if (keyed && transport_sealed(&t, &c->sec->keys, false, 1, rest, nrest, &err)) {
        transport_none(&t);
        drop(a, c, "dropped connection from %s: %s", err.msg);
        return -1;
    }
    if (a->cfg->tests->start(a->lt, &t, hello, keyed ? c->sec->secret : NULL, &c->addr, c->peer,
                              keyed ? tls_identity(c->tls) : NULL, why, sizeof why))
        refusal(a, "refused a link test from %s: %s", c->peer, why);
    release(a, c);   /* the server has the descriptor, or closed it */
    return -1;
}

/* A data connection of a link test: it goes to the test its token names. */
static int join_test(struct admission *a, struct pending *c, const struct codec_link *join)
{
    char why[200];
    /* a keyed listener tells a stranger nothing of its tests: whether one
     * runs, from where, or which of its checks a join failed */
    const char *told = a->cfg->tls ? "a data connection this listener does not take" : why;
    if (!a->lt)
        snprintf(why, sizeof why, "a data connection of a link test, and none is under way");
    if (!a->lt || a->cfg->tests->join(a->lt, c->fd, join, &c->addr, why, sizeof why)) {
        drop_telling(a, c, "refused connection from %s: %s", why, told);
        return -1;
    }
    log_msg(a->log, LOG_DEBUG, "connection from %s: a data connection of the link test",
            c->peer);
    release(a, c);
    return -1;
}

static int judge_record(struct admission *a, struct pending *c);

/* 'J': a connection joins the transfer under way (join_token), proven by
 * the session's token and, with a key, by the key it began under.  1:
 * admitted; -1: refused. */
static int judge_join(struct admission *a, struct pending *c, const struct codec_record *r)
{
    const unsigned char *token = a->cfg->join_token;
    if (!token || CRYPTO_memcmp(r->token, token, CODEC_TOKEN_SIZE) != 0 ||
        !(c->features & CODEC_FEATURE_STREAMS)) {
        drop(a, c, "refused connection from %s: %s", "it asked to join a transfer this "
             "listener does not have (it ended, or this is another receiver)");
        return -1;
    }
    if (a->cfg->join_identity &&
        !(c->tls && strcmp(tls_identity(c->tls), a->cfg->join_identity) == 0)) {
        drop(a, c, "refused connection from %s: %s", "it asked to join a transfer that "
             "began under another key");
        return -1;
    }
    c->join = true;
    c->join_index = r->join_index;
    c->join_count = r->join_count;
    return 1;
}

/* The sender's first record (after its greeting, or in its first sealed
 * record): a stream header begins a transfer; 'R' asks to resume the
 * session under way.  While one is under way (resume_token) only its
 * sender is admitted; otherwise nothing can be resumed.  1: admitted;
 * -1: refused. */
static int judge_first(struct admission *a, struct pending *c, const unsigned char *rec,
                       size_t len, bool sealed)
{
    struct codec_record r;
    char why[96];
    if (codec_parse_record(rec, len, &r, why, sizeof why) ||
        (r.type != 'H' && r.type != 'R' && r.type != 'J')) {
        drop(a, c, "refused connection from %s: %s",
             rec[8] == 'H' || rec[8] == 'R' || rec[8] == 'J'
                 ? why : "no weir stream header after its greeting");
        return -1;
    }
    if (r.type == 'J')
        return judge_join(a, c, &r);
    if (r.type == 'H' && a->cfg->join_token) {
        drop(a, c, "refused connection from %s: %s", "a transfer is under way here: this "
             "listener takes only its connections");
        return -1;
    }
    if (r.type == 'H' && (r.flags & CODEC_HEADER_SEALED) && !sealed) {
        /* the reader would refuse it at byte 0; refused here, it keeps no
         * one out (doc/stream-format.md, no block checksums) */
        drop(a, c, "refused connection from %s: %s", "a stream without block checksums, "
             "which only an encrypted connection may carry");
        return -1;
    }
    const unsigned char *token = a->cfg->resume_token;
    if (r.type == 'H' && token) {
        drop(a, c, "refused connection from %s: %s", "a transfer is under way here, and this "
             "listener waits for its sender to come back: it takes no other");
        return -1;
    }
    if (r.type == 'R' && (!token || CRYPTO_memcmp(r.token, token, CODEC_TOKEN_SIZE) != 0)) {
        drop(a, c, "refused connection from %s: %s", "it asked to resume a transfer this "
             "listener does not have (it ended, or this is another receiver)");
        return -1;
    }
    if (r.type == 'R' && a->cfg->resume_identity &&
        !(c->tls && strcmp(tls_identity(c->tls), a->cfg->resume_identity) == 0)) {
        /* the session belongs to the key it began under, not to its token alone */
        drop(a, c, "refused connection from %s: %s", "it asked to resume a transfer that "
             "began under another key");
        return -1;
    }
    c->rejoin = r.type == 'R';
    return 1;
}

/* Advance a connection's handshake with what arrived; what it must send
 * goes out at once (a fresh socket has room for it). */
static int handshake(struct admission *a, struct pending *c, const unsigned char *in, size_t n)
{
    unsigned char out[8192];
    size_t outlen = sizeof out;
    struct weir_error err;
    int st = tls_step(c->tls, in, n, out, &outlen, &err);
    if (outlen > 0 && os_send(c->fd, out, outlen, true) != (ssize_t)outlen &&
        st != TLS_FAILED) {
        drop(a, c, "dropped connection from %s: %s", "it does not read its handshake");
        return -1;
    }
    if (st == TLS_FAILED) {
        drop(a, c, "refused connection from %s: %s", err.msg);
        return -1;
    }
    if (st == TLS_WANT)
        return 0;
    c->sec->keys.epoch_records = a->cfg->epoch_records;
    if (tls_export(c->tls, &c->sec->keys, true, &err) ||
        (c->tester && tls_export_bytes(c->tls, LINKTEST_EXPORT_LABEL, c->sec->secret,
                                       sizeof c->sec->secret, &err))) {
        drop(a, c, "dropped connection from %s: %s", err.msg);
        return -1;
    }
    ssize_t left = tls_leftover(c->tls, c->buf, sizeof c->buf);
    if (left < 0) {   /* not reached: hear() reads no more than c->buf keeps */
        drop(a, c, "dropped connection from %s: %s", "more bytes after its handshake than "
             "the listener keeps");
        return -1;
    }
    c->have = (size_t)left;
    c->state = AWAIT_RECORD;
    return judge_record(a, c);
}

/* A service's sender names its target after its header: a well-formed
 * 'P' record, or it is refused.  0, or -1 (dropped). */
static int judge_place(struct admission *a, struct pending *c, const unsigned char *rec)
{
    struct codec_record r;
    char why[96];
    if (codec_parse_record(rec, CODEC_PLACE_SIZE, &r, why, sizeof why) || r.type != 'P') {
        drop(a, c, "refused connection from %s: %s", r.type == 'P' ? why : "no target "
             "record after its stream header");
        return -1;
    }
    snprintf(c->target, sizeof c->target, "%s", r.target);
    c->placed = true;
    return 0;
}

/* The first sealed record must open and hold the stream header (a
 * service's sender: and its target). */
static int judge_record(struct admission *a, struct pending *c)
{
    if (c->have < SEAL_HEADER)
        return 0;
    long body = seal_body_length(c->buf);
    if (body < 0 || body > FIRST_RECORD_MAX) {
        drop(a, c, "refused connection from %s: %s", "its first encrypted record is malformed");
        return -1;
    }
    size_t len = SEAL_HEADER + (size_t)body;
    if (c->have < len)
        return 0;
    struct sealer rx;
    struct weir_error err;
    unsigned char plain[FIRST_RECORD_MAX];
    size_t plen = 0;
    unsigned flags;
    int ok = sealer_init(&rx, &c->sec->keys.to_receiver, c->sec->keys.epoch_records, &err) == 0 &&
             open_record(&rx, 0, c->buf, len, plain, &plen, &flags) == 0;
    sealer_free(&rx);
    struct codec_record r;
    char why[96];
    if (c->tester) {
        if (!ok || plen != CODEC_LINK_SIZE ||
            codec_parse_record(plain, plen, &r, why, sizeof why) || r.type != 'L' ||
            r.link.op != CODEC_LINK_HELLO) {
            drop(a, c, "refused connection from %s: %s", ok ? "no link-test request in the "
                 "tester's first encrypted record" : "its first encrypted record does not "
                 "open");
            return -1;
        }
        return serve_tester(a, c, &r.link, c->buf + len, c->have - len);
    }
    if (!ok) {
        drop(a, c, "refused connection from %s: %s", "its first encrypted record does not open");
        return -1;
    }
    if (plen == CODEC_HEADER_SIZE + CODEC_PLACE_SIZE && a->cfg->serve)
        return judge_place(a, c, plain + CODEC_HEADER_SIZE) ? -1
                                                            : judge_first(a, c, plain,
                                                                          CODEC_HEADER_SIZE, true);
    if (plen != CODEC_HEADER_SIZE && plen != CODEC_SESSION_SIZE) {
        drop(a, c, "refused connection from %s: %s", "no weir stream header in its first "
             "encrypted record");
        return -1;
    }
    (void)r;
    (void)why;
    return judge_first(a, c, plain, plen, true);
}

/* The handshake began: what came after the greeting is its first bytes. */
static int handshake_after_greeting(struct admission *a, struct pending *c)
{
    size_t rest = c->have - CODEC_GREETING_SIZE;
    unsigned char first[PENDING_BUF];
    memcpy(first, c->buf + CODEC_GREETING_SIZE, rest);
    c->have = 0;
    return handshake(a, c, first, rest);
}

/* A link tester's greeting (r), and what follows it.  With a key it must
 * pass the handshake, and its request comes sealed (judge_record); without
 * one, its request (only to a keyless listener that allows tests) or a data
 * connection's join comes in clear.  0: keep waiting; -1: it left the
 * waiting set (refused, served or joined). */
static int judge_tester(struct admission *a, struct pending *c, const struct codec_record *r)
{
    if (c->state == AWAIT_GREETING) {
        c->tester = true;
        bool theirs = r->features & CODEC_FEATURE_KEY;
        if (theirs && !a->cfg->tls) {
            drop(a, c, "refused connection from %s: %s", "a link tester with a key: this "
                 "listener has none (give it --key-file as well, or the tester none)");
            return -1;
        }
        if (codec_keyed_older(r->features)) {
            drop(a, c, "refused connection from %s: %s", "a link tester with a key: "
                 CODEC_OLDER_KEYED);
            return -1;
        }
        if (theirs) {
            struct weir_error err;
            if (start_handshake(a, c, &err)) {
                drop(a, c, "dropped connection from %s: %s", err.msg);
                return -1;
            }
            c->state = IN_HANDSHAKE;
            return handshake_after_greeting(a, c) < 0 ? -1 : 0;
        }
        c->state = AWAIT_LINK;
    }
    if (c->have < CODEC_GREETING_SIZE + CODEC_LINK_SIZE)
        return 0;
    struct codec_record q;
    char why[96];
    if (codec_parse_record(c->buf + CODEC_GREETING_SIZE, CODEC_LINK_SIZE, &q, why,
                           sizeof why)) {
        char msg[160];
        snprintf(msg, sizeof msg, "after a link tester's greeting: %s", why);
        drop(a, c, "refused connection from %s: %s", msg);
        return -1;
    }
    if (q.type != 'L' || (q.link.op != CODEC_LINK_HELLO && q.link.op != CODEC_LINK_JOIN)) {
        drop(a, c, "refused connection from %s: %s", "no link-test request after the "
             "tester's greeting");
        return -1;
    }
    if (q.link.op == CODEC_LINK_JOIN)
        return join_test(a, c, &q.link);
    if (a->cfg->tls) {
        drop(a, c, "refused connection from %s: %s", "a link tester without a key: this "
             "listener serves link tests only to holders of its key (give the tester "
             "--key-file)");
        return -1;
    }
    if (!a->cfg->allow_link_test) {
        drop(a, c, "refused connection from %s: %s", "a link tester: this listener does not "
             "serve link tests (start it with --allow-link-test, or give both ends "
             "--key-file)");
        return -1;
    }
    return serve_tester(a, c, &q.link, NULL, 0);
}

/* The length of the record after a sender's greeting, a stream header or a
 * resume request, once its first 8 bytes are in (8 until then); 0: neither. */
static size_t first_length(const struct pending *c)
{
    if (c->have < CODEC_GREETING_SIZE + 8)
        return 8;
    size_t len = codec_record_length(c->buf + CODEC_GREETING_SIZE);
    return len == CODEC_HEADER_SIZE || len == CODEC_SESSION_SIZE ? len : 0;
}

/* Whether the first n bytes a peer sent could begin a weir greeting. */
static bool could_greet(const unsigned char *b, size_t n)
{
    unsigned char magic[4];
    codec_put32(magic, CODEC_WEIR_MAGIC);
    return memcmp(b, magic, n < 4 ? n : 4) == 0;
}

/* Judge what a weir peer has sent so far.  1: admitted; 0: keep waiting;
 * -1: refused (logged and dropped). */
static int judge_weir(struct admission *a, struct pending *c)
{
    if (c->state == AWAIT_RECORD)
        return judge_record(a, c);
    char why[160], start[32];
    size_t n = c->have;
    if (a->cfg->plain_too && c->state == AWAIT_GREETING &&
        (c->unmarked || !could_greet(c->buf, n))) {
        c->plain = true;   /* mbuffer, nc, socat: what they sent is the data */
        return 1;
    }
    if (n >= 4 && codec_get32(c->buf) != CODEC_WEIR_MAGIC) {
        describe_start(c->buf, n, start, sizeof start);
        snprintf(why, sizeof why, "it sent plain bytes ('%s'), not a weir greeting; a plain "
                 "sender needs weir -I --raw", start);
        drop(a, c, "refused connection from %s: %s", why);
        return -1;
    }
    if (n > 8 && c->buf[8] == 'H') {
        drop(a, c, "refused connection from %s: %s", "a weir sender without the greeting "
             "(older than this one): upgrade it");
        return -1;
    }
    if (n < CODEC_GREETING_SIZE)
        return 0;
    struct codec_record r;
    if (codec_parse_record(c->buf, CODEC_GREETING_SIZE, &r, why, sizeof why) ||
        r.type != 'G' || (r.role != CODEC_ROLE_SENDER && r.role != CODEC_ROLE_TESTER)) {
        drop(a, c, "refused connection from %s: %s", "it did not greet as a weir sender");
        return -1;
    }
    if (!codec_protocol_compatible(&r)) {
        snprintf(why, sizeof why, "the %s speaks weir protocol %u to %u, this receiver "
                 "%u to %u", r.role == CODEC_ROLE_TESTER ? "link tester" : "sender", r.oldest,
                 r.version, CODEC_PROTOCOL_OLDEST, CODEC_PROTOCOL);
        drop(a, c, "refused connection from %s: %s", why);
        return -1;
    }
    if (r.role == CODEC_ROLE_TESTER)
        return judge_tester(a, c, &r);
    c->features = r.features & CODEC_FEATURES_KNOWN;
    if (c->state == AWAIT_GREETING) {
        struct weir_error err;
        if (judge_keys(a, c, &r, &err))
            return -1;
        if (c->state == IN_HANDSHAKE)
            return handshake_after_greeting(a, c);
    }
    size_t first = first_length(c);
    if (first == 0) {
        drop(a, c, "refused connection from %s: %s", "no weir stream header after its greeting");
        return -1;
    }
    if (n < CODEC_GREETING_SIZE + first)
        return 0;
    return judge_first(a, c, c->buf + CODEC_GREETING_SIZE, first, false);
}

/* A --raw listener admits the first connection that sends a byte (left
 * in the socket).  1: admitted; 0: keep waiting; -1: dropped. */
static int hear_raw(struct admission *a, struct pending *c)
{
    char byte;
    ssize_t r = recv(c->fd, &byte, 1, MSG_PEEK);
    if (r > 0)
        return 1;
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (r < 0 && errno == ECONNRESET)
        r = 0;
    drop(a, c, "dropped connection from %s: %s",
         r == 0 ? "it closed without sending anything" : strerror(errno));
    return -1;
}

/* Read what a waiting connection sent.  1: admitted; 0: keep waiting;
 * -1: dropped. */
static int hear(struct admission *a, struct pending *c)
{
    if (a->cfg->raw)
        return hear_raw(a, c);
    if (c->state == IN_HANDSHAKE) {
        /* no more than c->buf holds: the read that brings the sender's
         * Finished may bring its first records too (it sends them at once),
         * and those bytes are kept in c->buf for the transport; a longer
         * handshake message simply takes more reads */
        unsigned char in[sizeof c->buf];
        ssize_t r = recv(c->fd, in, sizeof in, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (r > 0) {
            c->received += (uint64_t)r;
            c->heard = clock_now();
        }
        if (r <= 0) {
            drop(a, c, "dropped connection from %s: %s", "it closed during the handshake");
            return -1;
        }
        return handshake(a, c, in, (size_t)r);
    }
    /* only what this step needs: the rest stays in the socket */
    size_t first = c->state == AWAIT_HEADER ? first_length(c) : 0;
    if (c->state == AWAIT_HEADER && first == 0)
        return judge_weir(a, c);   /* refused there */
    size_t want = c->state == AWAIT_RECORD ? sizeof c->buf
                  : c->state == AWAIT_HEADER ? CODEC_GREETING_SIZE + first
                  : c->state == AWAIT_LINK ? CODEC_GREETING_SIZE + CODEC_LINK_SIZE
                                           : CODEC_GREETING_SIZE;
    if (c->have >= want) {
        drop(a, c, "refused connection from %s: %s", "it sent too much before proving itself");
        return -1;
    }
    ssize_t r = recv(c->fd, c->buf + c->have, want - c->have, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (r < 0 && errno == ECONNRESET)
        r = 0;   /* a scanner that closed at once gets a reset for the greeting */
    if (r == 0 && a->cfg->plain_too && c->state == AWAIT_GREETING && c->have > 0) {
        c->plain = true;   /* a few plain bytes that began like a greeting, and the end */
        return 1;
    }
    if (r <= 0) {
        drop(a, c, "dropped connection from %s: %s",
             r < 0 ? strerror(errno) : c->have == 0 ? "it closed without sending anything"
                                                    : "it closed before it sent a weir header");
        return -1;
    }
    c->have += (size_t)r;
    c->received += (uint64_t)r;
    c->heard = clock_now();
    return judge_weir(a, c);
}

/* The connection that proved itself becomes the input: 0, or -1 when it
 * could not be set up (it is dropped, and the listener goes on). */
/* A keyed sender's connection becomes a sealed transport.  The header was
 * opened to judge it; the stream decoder reads it again from ahead, and
 * the records after it from the transport (a resume request is the
 * listener's alone). */
static int admit_sealed(struct admission *a, struct pending *c, struct transport *t,
                        unsigned char *ahead, size_t *nahead)
{
    struct sealer rx;
    struct weir_error err;
    size_t len = SEAL_HEADER + (size_t)seal_body_length(c->buf), plen = 0;
    unsigned flags;
    unsigned char first[FIRST_RECORD_MAX];
    int rc = sealer_init(&rx, &c->sec->keys.to_receiver, c->sec->keys.epoch_records, &err) == 0 &&
                     open_record(&rx, 0, c->buf, len, first, &plen, &flags) == 0
                 ? transport_sealed(t, &c->sec->keys, false, 1, c->buf + len, c->have - len,
                                    &err)
                 : error_set(&err, WEIR_EXIT_INTERNAL, "cannot set up encryption");
    sealer_free(&rx);
    if (rc) {
        transport_none(t);
        drop(a, c, "dropped connection from %s: %s", err.msg);
        return -1;
    }
    if (!c->rejoin && !c->join) {
        /* a target record after the header is the listener's alone */
        *nahead = plen == CODEC_HEADER_SIZE + CODEC_PLACE_SIZE ? CODEC_HEADER_SIZE : plen;
        memcpy(ahead, first, *nahead);
    }
    OPENSSL_cleanse(first, sizeof first);
    log_msg(a->log, c->join ? LOG_DEBUG : LOG_INFO, "connection from %s, with the key "
            "'%s'%s", c->peer, tls_identity(c->tls), c->rejoin ? ": the sender is back"
                                                    : c->join ? ": it joins the transfer" : "");
    return 0;
}

static int admit(struct admission *a, struct pending *c, struct transport *t,
                 unsigned char *ahead, size_t *nahead, struct listener_peer *peer)
{
    char name[100];
    snprintf(name, sizeof name, "input %s", c->peer);
    transport_tcp(t, c->fd, name);
    t->wire_before = c->received;
    *nahead = 0;
    if (c->state == AWAIT_RECORD) {
        if (admit_sealed(a, c, t, ahead, nahead))
            return -1;
    } else if (c->plain) {
        peer->plain = true;
        *nahead = c->have;
        memcpy(ahead, c->buf, c->have);
        log_msg(a->log, LOG_INFO, "connection from %s: plain bytes (mbuffer, nc or socat)",
                c->peer);
    } else if (!a->cfg->raw) {
        size_t skip = CODEC_GREETING_SIZE + (c->rejoin || c->join ? CODEC_SESSION_SIZE : 0);
        *nahead = c->have - skip;
        memcpy(ahead, c->buf + skip, *nahead);
        log_msg(a->log, c->join ? LOG_DEBUG : LOG_INFO, "connection from %s%s", c->peer,
                c->rejoin ? ": the sender is back" : c->join ? ": it joins the transfer" : "");
    } else {
        log_msg(a->log, LOG_INFO, "connection from %s", c->peer);
    }
    peer->features = c->features;
    snprintf(peer->identity, sizeof peer->identity, "%s", c->tls ? tls_identity(c->tls) : "");
    peer->rejoined = c->rejoin;
    peer->joined = c->join;
    peer->join_index = c->join_index;
    peer->join_count = c->join_count;
    snprintf(peer->target, sizeof peer->target, "%s", c->target);
    peer->placed = c->placed;
    forget_handshake(c);
    c->fd = -1;
    a->count--;
    /* while a spread transfer gathers its connections, the others waiting
     * may be its own, and the listener stays */
    for (int i = 0; i < PENDING_PLACES && !a->cfg->join_token; i++)
        if (a->conn[i].fd >= 0)
            drop(a, &a->conn[i], "dropped connection from %s: %s",
                 "another sender was admitted first");
    /* a session that may resume keeps the port: its sender comes back there
     * (the ssh tunnel's too: through a new ssh session, from this host) */
    peer->resuming = a->cfg->resume && !c->plain && !a->cfg->raw &&
                     (c->features & CODEC_FEATURE_RESUME) &&
                     (a->l->fd >= 0 || a->cfg->redials);
    /* and so does one whose sender spreads it, for its other connections */
    peer->spread = a->cfg->streams && !c->plain && !a->cfg->raw &&
                   !c->join && (c->features & CODEC_FEATURE_STREAMS) &&
                   a->l->fd >= 0;
    peer->grow = peer->spread && (c->features & CODEC_FEATURE_GROW);
    peer->listening = peer->resuming || peer->spread || c->join || a->cfg->join_token;
    if (!peer->listening)
        tcp_listener_close(a->l);
    return 0;
}

void listener_refuse_waiting(struct tcp_listener *l, bool raw, struct weir_log *log)
{
    static const char why[] = LISTENER_BUSY " (this listener takes no other sender until it "
                              "ends)";
    int refused = 0;
    for (int i = 0; i < ACCEPT_BATCH && l->fd >= 0; i++) {
        struct sockaddr_storage ss;
        int fd = take_one(l, &ss);
        if (fd < 0 && errno == ECONNABORTED)
            continue;
        if (fd < 0)
            break;
        /* one line a batch (a batch every half second at most): a flood
         * during a transfer must not fill a -l file */
        if (refused++ == 0) {
            char peer[80];
            tcp_format_addr((struct sockaddr *)&ss, peer, sizeof peer);
            log_msg(log, LOG_WARN, "refused connection from %s: %s", peer, why);
        }
        if (!raw && !l->handoff) {   /* a handed-over one was greeted: it waits for TLS */
            send_refusal(fd, why);
            end_refused(fd);
        }
        close(fd);
    }
    if (refused > 1)
        log_msg(log, LOG_WARN, "... and %d more connections refused at once (busy)", refused - 1);
}

/* Drop connections whose time is up; the earliest remaining deadline. */
static double expire(struct admission *a, double now)
{
    double next = 0;
    for (int i = 0; i < PENDING_PLACES; i++) {
        struct pending *c = &a->conn[i];
        if (c->fd < 0 || c->deadline == 0)
            continue;
        if (now >= c->deadline) {
            char why[96];
            bool plain = a->cfg->raw || a->cfg->plain_too;
            const char *fmt = plain ? "it sent nothing for %g s"
                              : c->state == AWAIT_LINK
                                  ? "a link tester's greeting, then no request within %g s"
                              : c->state == AWAIT_HEADER
                                  ? "a weir greeting, then no stream header within %g s"
                              : c->state == IN_HANDSHAKE ? "no finished handshake within %g s"
                              : c->state == AWAIT_RECORD
                                  ? "a handshake, then no first record within %g s"
                                  : "it sent no weir greeting and header within %g s";
            snprintf(why, sizeof why, fmt,
                     plain ? a->cfg->io_timeout : a->cfg->handshake_timeout);
            drop(a, c, "dropped connection from %s: %s", why);
        } else if (next == 0 || c->deadline < next) {
            next = c->deadline;
        }
    }
    return next;
}

static int wait_ms(double now, double a, double b, int tick)
{
    double until = a == 0 ? b : b == 0 ? a : a < b ? a : b;
    if (until == 0)
        return tick;   /* the stop flag is looked at after every wake-up anyway */
    double ms = (until - now) * 1000.0 + 1;
    return ms > tick ? tick : ms < 0 ? 0 : (int)ms;
}

/* Where listener_admit() puts what it admitted. */
struct admitted {
    struct transport *t;
    unsigned char *ahead;
    size_t *nahead;
    struct listener_peer *peer;
};

/* The connection given (--ssh's channel), greeted as the first one heard. */
static int hear_channel(struct admission *a, struct weir_error *err)
{
    const struct listener_config *cfg = a->cfg;
    struct pending *c = &a->conn[0];
    double now = clock_now();
    *c = (struct pending){.fd = cfg->channel_fd, .since = now, .trusted = cfg->channel_trusted,
                          .deadline = now + cfg->handshake_timeout};
    snprintf(c->peer, sizeof c->peer, "%s", cfg->channel_name ? cfg->channel_name
                                                              : "the channel");
    a->count++;
    if (cfg->channel_greeted || greet(a, c->fd, c->trusted) == 0)
        return 0;
    error_sys(err, WEIR_EXIT_NETWORK, errno, "%s", c->peer);
    drop(a, c, NULL, NULL);
    return -1;
}

/* Why the admission loop ends before its next round, if it does: -1 with
 * *err and errno (ECANCELED, ENOTCONN, ETIMEDOUT), else 0. */
static int admission_over(struct admission *a, atomic_bool *stop, int lfd, double give_up,
                          struct weir_error *err)
{
    const char *addr = a->l->addr;
    if (atomic_load(stop)) {
        error_sys(err, WEIR_EXIT_NETWORK, ECANCELED, "listen %s", addr);
        errno = ECANCELED;
        return -1;
    }
    if (lfd < 0 && a->count == 0) {
        /* only the given connection was to be heard, and it is gone */
        error_set(err, WEIR_EXIT_NETWORK, "%s: no weir sender proved itself on it", addr);
        errno = ENOTCONN;
        return -1;
    }
    if (give_up && clock_now() >= give_up) {
        error_set(err, WEIR_EXIT_NETWORK, "listen %s: no connection within %g s", addr,
                  a->cfg->accept_timeout);
        errno = ETIMEDOUT;
        return -1;
    }
    return 0;
}

/* One round: wait for what comes next, hear the waiting connections and
 * accept new ones.  1: one was admitted; 0: go on; -1 with *err. */
static int admission_round(struct admission *a, int lfd, double give_up,
                           const struct admitted *out, struct weir_error *err)
{
    double now = clock_now();
    double next = expire(a, now);
    struct pollfd pfd[1 + PENDING_PLACES];
    struct pending *who[1 + PENDING_PLACES];
    int n = 0;
    pfd[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < PENDING_PLACES; i++)
        if (a->conn[i].fd >= 0) {
            who[n] = &a->conn[i];
            pfd[n++] = (struct pollfd){.fd = a->conn[i].fd, .events = POLLIN};
        }
    int r = poll(pfd, (nfds_t)n, wait_ms(now, next, give_up, a->tick_ms));
    if (r < 0 && errno != EINTR)
        return error_sys(err, WEIR_EXIT_NETWORK, errno, "listen %s: poll", a->l->addr);
    if (r <= 0)
        return 0;
    struct pending *won = NULL;
    for (int i = 1; i < n && !won; i++)
        if (pfd[i].revents && who[i]->fd >= 0 && hear(a, who[i]) == 1)
            won = who[i];
    if (won && admit(a, won, out->t, out->ahead, out->nahead, out->peer) == 0)
        return 1;
    if (!pfd[0].revents)
        return 0;
    if (accept_some(a, &won, err))
        return -1;
    return won && admit(a, won, out->t, out->ahead, out->nahead, out->peer) == 0;
}

/* An admission's state, large (a buffer per waiting connection): on the
 * heap.  NULL with *err. */
static struct admission *admission_new(struct tcp_listener *l, const struct listener_config *cfg,
                                       struct weir_log *log, struct weir_error *err)
{
    struct admission *a = calloc(1, sizeof *a);
    if (!a) {
        error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "listen %s", l->addr);
        return NULL;
    }
    a->l = l;
    a->cfg = cfg;
    a->log = log;
    a->tick_ms = 1000;
    for (int i = 0; i < PENDING_PLACES; i++)
        a->conn[i].fd = -1;
    return a;
}

/* The admission is over: what still waits is dropped unheard, and errno
 * is kept for the caller. */
static void admission_free(struct admission *a)
{
    int why = errno;
    for (int i = 0; i < PENDING_PLACES; i++)
        if (a->conn[i].fd >= 0)
            drop(a, &a->conn[i], NULL, NULL);
    free(a);
    errno = why;
}

int listener_admit(struct tcp_listener *l, const struct listener_config *cfg, atomic_bool *stop,
                   struct weir_log *log, struct transport *t, unsigned char *ahead,
                   size_t *nahead, struct listener_peer *peer, struct weir_error *err)
{
    memset(peer, 0, sizeof *peer);
    struct admission *a = admission_new(l, cfg, log, err);
    if (!a)
        return -1;
    double give_up = cfg->accept_timeout > 0 ? clock_now() + cfg->accept_timeout : 0;
    /* a connection given (--ssh's) is the only one heard: the listening
     * socket beside it is for that sender's return, and before a session
     * is named nobody else may begin one there (through ssh it is open to
     * every user of this host, and nothing but the channel proves itself) */
    int lfd = cfg->channel_fd >= 0 ? -1 : l->fd;
    if (cfg->channel_fd >= 0 && hear_channel(a, err)) {
        free(a);
        return -1;
    }
    const struct admitted out = {t, ahead, nahead, peer};
    int rc;
    do {
        tests_reap(a);   /* a test that is over leaves no thread behind */
        rc = admission_over(a, stop, lfd, give_up, err) ? -1
                                                        : admission_round(a, lfd, give_up, &out, err);
    } while (rc == 0);
    if (rc == 1) {
        /* the transfer begins: a link test would only compete with it */
        tests_end(a, "the listener admitted its transfer");
        free(a);
        return 0;
    }
    int why = errno;   /* ETIMEDOUT, ECANCELED, ...: the caller tells them apart */
    for (int i = 0; i < PENDING_PLACES; i++)
        if (a->conn[i].fd >= 0)
            drop(a, &a->conn[i], NULL, NULL);
    tests_end(a, "the listener is shutting down");
    free(a);
    errno = why;
    return -1;
}

/* ---- the other connections of a spread transfer ---------------------------- */

/* Answer a join ('J' back, the same), unless it is refused (bad: why),
 * or the answer cannot go; a refused one is logged, told why (in an 'S'
 * it reads, if it does) and dropped.  Whether it was answered. */
static bool answer_join(const struct listener_config *cfg, struct weir_log *log,
                        struct transport *t, const struct listener_peer *peer, const char *bad)
{
    unsigned char rec[CODEC_SESSION_SIZE];
    codec_join(rec, cfg->join_token, peer->join_index, peer->join_count);
    if (!bad && transport_write_all(t, rec, sizeof rec, (int)(cfg->handshake_timeout * 1000),
                                    NULL) != 0)
        bad = "it did not read the answer to its join";
    OPENSSL_cleanse(rec, sizeof rec);
    if (!bad)
        return true;
    log_msg(log, LOG_WARN, "refused connection %s: %s", t->name, bad);
    unsigned char st[CODEC_RECORD_MAX];
    size_t sn = codec_status(st, WEIR_EXIT_NETWORK, 0, 0, bad);
    (void)transport_write_all(t, st, sn, 1000, NULL);   /* told, when it reads */
    struct weir_error ignored;
    t->ops->abort(t);
    transport_close(t, false, NULL, &ignored);
    return false;
}

/* A joined connection: put in its place (conns[index]) and told so ('J'
 * back), or dropped when it contradicts the others.  Whether it was kept. */
static bool place_join(const struct listener_config *cfg, struct weir_log *log,
                       struct transport *t, size_t nahead, const struct listener_peer *peer,
                       struct transport *conns, unsigned *count)
{
    const char *bad = nahead > 0                       ? "it sent data before it was taken"
                      : *count && peer->join_count != *count ? "it counts the connections "
                                                               "differently"
                      : conns[peer->join_index].fd >= 0 ? "another connection took its place"
                      : NULL;
    if (!answer_join(cfg, log, t, peer, bad))
        return false;
    *count = peer->join_count;
    conns[peer->join_index] = *t;
    transport_none(t);
    log_msg(log, LOG_DEBUG, "%s joined the transfer as connection %u of %u", conns[peer->join_index].name,
            peer->join_index + 1, peer->join_count);
    return true;
}

int listener_gather(struct tcp_listener *l, const struct listener_config *cfg,
                    atomic_bool *stop, struct weir_log *log, struct transport *conns,
                    unsigned *count, struct listener_admitted *back, struct weir_error *err)
{
    struct admission *a = admission_new(l, cfg, log, err);
    if (!a)
        return -1;
    double give_up = clock_now() + cfg->accept_timeout;
    unsigned joined = 0;
    int rc = 0;
    while (rc == 0 && (*count == 0 || joined + 1 < *count)) {
        memset(&back->peer, 0, sizeof back->peer);
        back->nahead = 0;
        const struct admitted out = {&back->t, back->ahead, &back->nahead, &back->peer};
        rc = admission_over(a, stop, l->fd, give_up, err) ? -1
             : admission_round(a, l->fd, give_up, &out, err);
        if (rc == 1 && back->peer.rejoined)
            break;   /* the sender gave this attempt up and is back (resume_token) */
        if (rc == 1)
            joined += place_join(cfg, log, &back->t, back->nahead, &back->peer, conns, count);
        rc = rc == 1 ? 0 : rc;
    }
    admission_free(a);
    return rc;
}

/* A late join: one connection more for a transfer under way, put after
 * the others.  It says which it is and of how many; the receiver numbers
 * it by its arrival, and checks only that there is room (no_room: why
 * not, or NULL).  Told so, or refused, told why, when it sent data before
 * it was taken or there is no room. */
static bool answer_late(const struct listener_config *cfg, struct weir_log *log,
                        struct listener_admitted *got, const char *no_room)
{
    return answer_join(cfg, log, &got->t, &got->peer,
                       got->nahead > 0 ? "it sent data before it was taken" : no_room);
}

int listener_join_late(struct tcp_listener *l, const struct listener_config *cfg,
                       atomic_bool *stop, struct weir_log *log, listener_room_fn room,
                       listener_place_fn place, void *ctx, struct listener_admitted *got,
                       struct weir_error *err)
{
    struct admission *a = admission_new(l, cfg, log, err);
    if (!a)
        return -1;
    a->tick_ms = LISTENER_LATE_TICK_MS;
    int rc = 0;
    while (rc == 0) {
        memset(&got->peer, 0, sizeof got->peer);
        got->nahead = 0;
        const struct admitted out = {&got->t, got->ahead, &got->nahead, &got->peer};
        rc = admission_over(a, stop, l->fd, 0, err) ? -1
             : admission_round(a, l->fd, 0, &out, err);
        if (rc == 1 && !got->peer.rejoined) {
            if (answer_late(cfg, log, got, room(ctx)))
                place(ctx, &got->t);
            rc = 0;
        }
    }
    admission_free(a);
    return rc;
}
