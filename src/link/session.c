/* session.c - see session.h and doc/stream-format.md. */
#include "link/session.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/io.h"
#include "base/sync.h"
#include "crypto/seal.h"
#include "crypto/tls.h"
#include "os/os.h"

/* ---- the sending side ---------------------------------------------------- */

void session_out_init(struct session_out *s, struct transport *t, bool greet, bool frame,
                      bool compressed, uint32_t block_max)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    s->greet = greet;
    s->frame = frame;
    s->compressed = compressed;
    s->block_max = block_max;
}

/* Read n bytes by an absolute deadline (0: none), not a timeout that each
 * byte renews: a peer trickling a byte at a time cannot stretch it. */
static ssize_t read_by(struct transport *t, unsigned char *buf, size_t n, double deadline,
                       atomic_bool *stop)
{
    size_t got = 0;
    while (got < n) {
        int ms = -1;
        if (deadline > 0) {
            /* past the deadline, what has arrived is still read (a timeout
             * of 0 reads without waiting): a process stopped for longer
             * (SIGSTOP, a suspended machine) finds its peer's records
             * waiting, not silence */
            double left = deadline - clock_now();
            ms = left <= 0 ? 0 : (int)(left * 1000) + 1;
        }
        ssize_t r = t->ops->read(t, buf + got, n - got, ms, stop);
        if (r < 0)
            return got > 0 && errno == ETIMEDOUT ? (ssize_t)got : -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int session_read_record(struct transport *t, int timeout_ms, atomic_bool *stop,
                        struct codec_record *r, unsigned char *raw, size_t *got, bool *eof,
                        struct weir_error *err)
{
    *got = 0;
    *eof = false;
    double deadline = timeout_ms < 0 ? 0 : clock_now() + timeout_ms / 1000.0;
    ssize_t n = read_by(t, raw, 8, deadline, stop);
    size_t len = n == 8 ? codec_record_length(raw) : 0;
    if (n == 8 && len > 8) {
        ssize_t m = read_by(t, raw + 8, len - 8, deadline, stop);
        n = m < 0 ? m : 8 + m;
    }
    if (n >= 0 && (size_t)n < (len ? len : 8) && deadline > 0 && clock_now() >= deadline) {
        errno = ETIMEDOUT;   /* part of a record by the deadline: too slow */
        n = -1;
    }
    if (n < 0) {
        int e = errno;
        if (t->sealed && (e == EBADMSG || e == EPROTO))
            /* the receiver's records are sealed as the stream is: one that
             * does not open was altered on the way, as for the stream */
            error_set(err, WEIR_EXIT_INTEGRITY, "%s: %s", t->name,
                      e == EBADMSG ? "an encrypted record from the receiver does not open "
                                     "(corrupt, forged, dropped, duplicated or reordered)"
                                   : "data after the end of the receiver's encrypted records");
        else if (e != ECANCELED)
            error_sys(err, WEIR_EXIT_NETWORK, e, "%s", t->name);
        errno = e;
        return -1;
    }
    *got = (size_t)n;
    char why[96];
    if (n == 8 && len == 0)
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the receiver answered with garbage",
                         t->name);
    if ((size_t)n < 8 || (size_t)n < len) {
        *eof = true;
        return error_set(err, WEIR_EXIT_NETWORK,
                         "%s: the receiver closed the connection without an answer", t->name);
    }
    if (codec_parse_record(raw, len, r, why, sizeof why))
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the receiver answered with garbage (%s)",
                         t->name, why);
    return 0;
}

#define NOT_WEIR "it does not seem to be weir (nc -l, socat and mbuffer take plain bytes: " \
                 "weir --raw)"
#define NOT_LISTENER "it does not seem to be a weir listener"

double session_silence(double io_timeout)
{
    if (io_timeout <= 0 || io_timeout >= SESSION_SILENCE_SECS)
        return SESSION_SILENCE_SECS;
    return io_timeout < CODEC_SILENCE_MIN ? CODEC_SILENCE_MIN : io_timeout;
}

int session_read_greeting(struct session_out *s, double limit, atomic_bool *stop,
                          struct weir_error *err)
{
    unsigned char raw[CODEC_RECORD_MAX];
    struct codec_record r;
    size_t got;
    bool eof;
    const char *name = s->t->name;
    /* plain bytes are no way out for a link tester */
    const char *hint = s->rejoining ? "it was a weir receiver before the break"
                       : s->tester  ? NOT_LISTENER
                                    : NOT_WEIR;
    if (session_read_record(s->t, (int)(limit * 1000), stop, &r, raw, &got, &eof, err) == 0) {
        if (r.type == 'S' && r.code != 0)   /* refused, and told why */
            return error_set(err, WEIR_EXIT_NETWORK, "receiver: %s", r.msg);
        if (r.type != 'G' || r.role != CODEC_ROLE_RECEIVER)
            return error_set(err, WEIR_EXIT_NETWORK, "%s: the peer did not greet as a weir "
                             "receiver", name);
        if (!codec_protocol_compatible(&r))
            return error_set(err, WEIR_EXIT_NETWORK, "%s: the receiver speaks weir protocol "
                             "%u to %u, this weir %u to %u: upgrade the older one", name,
                             r.oldest, r.version, CODEC_PROTOCOL_OLDEST, CODEC_PROTOCOL);
        s->peer_features = r.features & CODEC_FEATURES_KNOWN;
        return 0;
    }
    if (errno == ECANCELED && atomic_load(stop))
        return -1;
    s->peer_silent = got == 0 && !eof && errno == ETIMEDOUT;
    if (got >= 4 && codec_get32(raw) != CODEC_WEIR_MAGIC) {
        char start[25];
        size_t j = 0;
        for (size_t i = 0; i < got && j + 1 < sizeof start; i++)
            start[j++] = raw[i] >= 0x20 && raw[i] < 0x7f ? (char)raw[i] : '.';
        start[j] = '\0';
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the peer sent '%s', not a weir "
                         "greeting: %s", name, start, hint);
    }
    if (eof)
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the peer closed the connection without "
                         "a weir greeting: %s", name, hint);
    if (errno == ETIMEDOUT)
        return error_set(err, WEIR_EXIT_NETWORK, "%s: no weir greeting within %.3g s: %s",
                         name, limit, hint);
    return -1;   /* *err says why */
}

/* The header flags of a compressed stream. */
static unsigned compressed_flags(const struct session_out *s)
{
    return CODEC_HEADER_COMPRESSED | (s->zstd ? CODEC_HEADER_ZSTD : 0);
}

uint32_t session_features(const struct session_out *s)
{
    return CODEC_FEATURES | (s->resume ? CODEC_FEATURE_RESUME : 0) |
           (s->resume && s->reread ? CODEC_FEATURE_REREAD : 0) |
           (s->spread ? CODEC_FEATURE_STREAMS : 0) |
           (s->spread && s->grow ? CODEC_FEATURE_GROW : 0);
}

int session_begin(struct session_out *s, int timeout_ms, atomic_bool *stop,
                  struct weir_error *err)
{
    unsigned char hello[CODEC_GREETING_SIZE + CODEC_HEADER_SIZE + CODEC_PLACE_SIZE];
    size_t n = 0, greeting = 0;
    if (s->greet && !s->greeted)
        n = greeting = codec_greeting(hello, CODEC_ROLE_SENDER, session_features(s));
    /* a zstd file (no receiver to ask) carries its holes as records */
    s->version = (s->peer_features & CODEC_FEATURE_HOLES) || (s->zstd && !s->greet)
                 ? CODEC_VERSION : 1;
    if (s->frame) {
        /* the AEAD tags of sealed records authenticate every stored block,
         * so hashing them again would only cost a pass over the data */
        s->unsummed = s->t->sealed != NULL;
        codec_header(hello + n, s->block_max, s->unsummed ? CODEC_HEADER_SEALED : 0,
                     s->version);
        s->chain = codec_chain_start(hello + n);
        n += CODEC_HEADER_SIZE;
    } else if (s->compressed) {
        n += codec_header(hello + n, s->block_max, compressed_flags(s), s->version);
    }
    size_t place = 0;
    if (n > greeting && (s->peer_features & CODEC_FEATURE_SERVE) && s->t->sealed)
        place = codec_place(hello + n, s->target ? s->target : "");
    s->spoke = true;
    if (n > 0 && transport_write_all(s->t, hello, n + place, timeout_ms, stop)) {
        int e = errno;
        if (e != ECANCELED)
            error_sys(err, s->t->status, e, "%s: write", s->t->name);
        errno = e;
        return -1;
    }
    s->sent = n - greeting;
    return 0;
}

int session_resend_header(struct session_out *s, int timeout_ms, atomic_bool *stop,
                          struct weir_error *err)
{
    unsigned char h[CODEC_HEADER_SIZE];
    if (s->frame) {
        codec_header(h, s->block_max, s->unsummed ? CODEC_HEADER_SEALED : 0, s->version);
        s->chain = codec_chain_start(h);
    } else {
        codec_header(h, s->block_max, compressed_flags(s), s->version);
    }
    for (size_t off = 0; off < sizeof h;) {
        struct iovec iov = {h + off, sizeof h - off};
        ssize_t w = session_writev(s, &iov, 1, timeout_ms, stop);
        if (w < 0) {
            int e = errno;
            if (e != ECANCELED)
                error_sys(err, s->t->status, e, "%s: write", s->t->name);
            errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

ssize_t session_writev(struct session_out *s, const struct iovec *iov, int cnt,
                       int timeout_ms, atomic_bool *stop)
{
    if (s->skip > 0) {
        size_t total = 0;
        for (int i = 0; i < cnt; i++)
            total += iov[i].iov_len;
        size_t k = total < s->skip ? total : (size_t)s->skip;
        s->skip -= k;
        s->sent += k;
        return (ssize_t)k;
    }
    ssize_t w = s->t->ops->writev(s->t, iov, cnt, timeout_ms, stop);
    if (w > 0)
        s->sent += (uint64_t)w;
    return w;
}

/* A new connection's first record ('R', 'J': a session record, holding
 * the token, wiped once written): 0, or -1 with errno and (unless
 * stopped) *err. */
static int write_first_record(struct session_out *s, unsigned char rec[CODEC_SESSION_SIZE],
                              int timeout_ms, atomic_bool *stop, struct weir_error *err)
{
    int rc = transport_write_all(s->t, rec, CODEC_SESSION_SIZE, timeout_ms, stop);
    int e = errno;
    OPENSSL_cleanse(rec, CODEC_SESSION_SIZE);
    if (rc && e != ECANCELED)
        error_sys(err, WEIR_EXIT_NETWORK, e, "%s: write", s->t->name);
    errno = e;
    return rc ? -1 : 0;
}

int session_rejoin(struct session_out *s, const unsigned char token[CODEC_TOKEN_SIZE],
                   double limit, atomic_bool *stop, uint64_t *at, bool *refused,
                   struct weir_error *err)
{
    *refused = false;
    unsigned char rec[CODEC_SESSION_SIZE];
    codec_session(rec, 'R', token);
    if (write_first_record(s, rec, (int)(limit * 1000) + 1, stop, err))
        return -1;
    unsigned char raw[CODEC_RECORD_MAX];
    struct codec_record r;
    size_t got;
    bool eof;
    /* a keepalive before C: a receiver that let its main thread's go first */
    do {
        if (session_read_record(s->t, (int)(limit * 1000) + 1, stop, &r, raw, &got, &eof,
                                err))
            return -1;
    } while (r.type == 'K');
    if (r.type == 'S') {
        *refused = true;
        return error_set(err, WEIR_EXIT_NETWORK, "receiver: %s", r.msg);
    }
    if (r.type != 'C')
        return error_set(err, WEIR_EXIT_NETWORK, "%s: unexpected '%c' record from the receiver "
                         "when resuming", s->t->name, r.type);
    *at = r.bytes;
    return 0;
}

int session_join_ask(struct session_out *s, const unsigned char token[CODEC_TOKEN_SIZE],
                     unsigned index, unsigned count, double limit, atomic_bool *stop,
                     struct weir_error *err)
{
    unsigned char rec[CODEC_SESSION_SIZE];
    codec_join(rec, token, index, count);
    return write_first_record(s, rec, (int)(limit * 1000) + 1, stop, err);
}

int session_join_answer(struct session_out *s, const unsigned char token[CODEC_TOKEN_SIZE],
                        unsigned index, unsigned count, double limit, atomic_bool *stop,
                        bool *refused, struct weir_error *err)
{
    *refused = false;
    unsigned char raw[CODEC_RECORD_MAX];
    struct codec_record r;
    size_t got;
    bool eof;
    if (session_read_record(s->t, (int)(limit * 1000) + 1, stop, &r, raw, &got, &eof, err))
        return -1;
    if (r.type == 'S') {
        *refused = true;
        return error_set(err, WEIR_EXIT_NETWORK, "receiver: %s", r.msg);
    }
    bool same = r.type == 'J' && r.join_index == index && r.join_count == count &&
                CRYPTO_memcmp(r.token, token, CODEC_TOKEN_SIZE) == 0;
    OPENSSL_cleanse(raw, sizeof raw);
    OPENSSL_cleanse(&r, sizeof r);
    if (!same)
        return error_set(err, WEIR_EXIT_NETWORK, "%s: the receiver did not take the connection "
                         "into the session", s->t->name);
    return 0;
}

/* Write every byte of iov, keeping what is left in s->pending when the
 * write is interrupted, so that an abort can finish the frame first. */
static int write_frame(struct session_out *s, struct iovec *iov, int cnt, int timeout_ms,
                       atomic_bool *stop)
{
    while (cnt > 0) {
        if (iov->iov_len == 0) {
            iov++;
            cnt--;
            continue;
        }
        ssize_t w = session_writev(s, iov, cnt, timeout_ms, stop);
        if (w < 0) {
            memcpy(s->pending, iov, sizeof *iov * (size_t)cnt);
            s->npending = cnt;
            return -1;
        }
        io_iov_advance(&iov, &cnt, (size_t)w);
    }
    s->npending = 0;
    return 0;
}

ssize_t session_frame(struct session_out *s, const unsigned char *src, size_t n,
                      int timeout_ms, atomic_bool *stop)
{
    if (n > s->block_max)
        n = s->block_max;
    uint64_t hash = s->unsummed ? 0 : codec_block_hash(src, n, s->seq);
    codec_frame_prefix(s->prefix, s->block_max, (uint32_t)n, true);
    codec_frame_suffix(s->suffix, s->seq, (uint32_t)n, hash);
    struct iovec iov[3] = {{s->prefix, sizeof s->prefix}, {(void *)src, n},
                           {s->suffix, sizeof s->suffix}};
    if (write_frame(s, iov, 3, timeout_ms, stop))
        return -1;
    s->seq++;
    s->total += n;
    s->chain = codec_chain(s->chain, hash, (uint32_t)n);
    return (ssize_t)n;
}

bool session_holes(const struct session_out *s)
{
    return s->version >= 2;
}

int session_hole(struct session_out *s, uint64_t seq, uint64_t len, int timeout_ms,
                 atomic_bool *stop)
{
    if (s->frame)
        seq = s->seq;
    codec_hole(s->hole, seq, len);
    struct iovec iov = {s->hole, sizeof s->hole};
    if (write_frame(s, &iov, 1, timeout_ms, stop))
        return -1;
    if (s->frame) {
        s->seq++;
        s->total += len;
        s->chain = codec_chain_hole(s->chain, codec_get64(s->hole + CODEC_HOLE_SIZE - 8), len);
    }
    return 0;
}

int session_trailer(struct session_out *s, int timeout_ms, atomic_bool *stop)
{
    unsigned char tr[CODEC_TRAILER_SIZE];
    codec_trailer(tr, s->total, s->seq, s->chain);
    struct iovec iov = {tr, sizeof tr};
    return write_frame(s, &iov, 1, timeout_ms, stop);
}

bool session_abort(struct session_out *s, int code, const char *msg, const void *rest,
                   size_t restlen)
{
    /* only a peer that greeted as weir gets weir's abort record, and over
     * an encrypted connection only when no record went out in part */
    if (!s->greet || !s->spoke || s->t->fd < 0 ||
        (s->t->sealed && !transport_sealed_intact(s->t)))
        return false;
    atomic_bool never = false;
    int ms = (int)(SESSION_ABORT_SECS * 1000);
    struct iovec pending[3];
    int npending = s->npending;
    memcpy(pending, s->pending, sizeof pending);
    if (npending > 0 && write_frame(s, pending, npending, ms, &never))
        return false;
    if (restlen > 0 && transport_write_all(s->t, rest, restlen, ms, &never))
        return false;
    unsigned char rec[CODEC_RECORD_MAX];
    size_t n = codec_abort(rec, code, msg);
    if (s->t->sealed) {
        /* the abort is numbered apart, and ends the direction */
        transport_sealed_control(s->t);
        transport_sealed_last(s->t);
    }
    if (transport_write_all(s->t, rec, n, ms, &never))
        return false;
    struct weir_error ignored;
    return s->t->ops->half_close(s->t, &ignored) == 0;
}

int session_greet_keyed(struct session_out *s, int timeout_ms, atomic_bool *stop,
                        struct weir_error *err)
{
    unsigned char g[CODEC_GREETING_SIZE];
    codec_greeting_routed(g, CODEC_ROLE_SENDER,
                          (session_features(s) & ~CODEC_FEATURE_REREAD) | CODEC_FEATURES_KEYED,
                          s->route);
    s->greeted = true;
    if (transport_write_all(s->t, g, sizeof g, timeout_ms, stop)) {
        int e = errno;
        if (e != ECANCELED)
            error_sys(err, s->t->status, e, "%s: write", s->t->name);
        errno = e;
        return -1;
    }
    return 0;
}

uint64_t session_framed_bytes(const struct session_out *s)
{
    return s->total;
}

uint64_t session_framed_chain(const struct session_out *s)
{
    return s->chain;
}

/* ---- the receiving side -------------------------------------------------- */

void session_in_init(struct session_in *s, struct transport *t)
{
    memset(s, 0, sizeof *s);
    s->t = t;
}

/* Send what is left of the record under way without blocking: the main
 * thread must not hang on a sender that stopped reading.  True when all of
 * it is out; a send error is left for the reader (or the answer) to meet. */
static bool flush_pending(struct session_in *s)
{
    while (s->len > 0) {
        ssize_t n = os_send(s->t->fd, s->out, s->len, true);
        transport_count(s->t->wire_tx, n);
        if (n <= 0)
            return false;
        memmove(s->out, s->out + n, s->len - (size_t)n);
        s->len -= (size_t)n;
    }
    return true;
}

void session_keepalive(struct session_in *s, uint64_t written, enum session_phase phase,
                       double now)
{
    if (now < s->next_keepalive || s->t->fd < 0)
        return;
    s->next_keepalive = now + CODEC_KEEPALIVE_SECS;
    if (!flush_pending(s))
        return;   /* the last one is still on its way */
    unsigned char k[CODEC_KEEPALIVE_SIZE];
    size_t n = codec_keepalive(k, written, phase);
    s->len = s->t->sealed ? transport_seal(s->t, k, n, s->out) : (memcpy(s->out, k, n), n);
    flush_pending(s);   /* a record that could not be sealed (len 0) is simply not sent */
}

int session_name(struct session_in *s, const unsigned char token[CODEC_TOKEN_SIZE],
                 uint32_t route)
{
    unsigned char rec[CODEC_SESSION_SIZE];
    codec_session_routed(rec, 'N', token, route);
    atomic_bool never = false;
    return transport_write_all(s->t, rec, sizeof rec, 10000, &never);
}

bool session_confirm(struct session_in *s, uint64_t held)
{
    if (s->t->fd < 0 || !flush_pending(s))
        return false;
    unsigned char c[CODEC_SESSION_SIZE];
    size_t n = codec_confirm(c, held);
    s->len = s->t->sealed ? transport_seal(s->t, c, n, s->out) : (memcpy(s->out, c, n), n);
    if (s->len == 0)
        return false;   /* not sealed: not sent, so not confirmed (the next try sends it) */
    flush_pending(s);
    return true;   /* on its way (the rest of it goes with the next record) */
}

#define DRAIN_SECS 5.0   /* how long a receiver reads on after it answered */

/* Records in what the sender sent after the answer: true at a 'D' that
 * says it read this answer (bytes, chain).  Anything before it (a trailer
 * sent again after a resume at the very end) is passed over; buf keeps a
 * record cut between reads. */
static bool found_done(unsigned char *buf, size_t *have, uint64_t bytes, uint64_t chain)
{
    size_t at = 0;
    for (;;) {
        size_t left = *have - at, len = left >= 8 ? codec_record_length(buf + at) : 0;
        if (left >= 8 && len == 0) {
            *have = 0;   /* not records: nothing to find */
            return false;
        }
        if (left < 8 || left < len)
            break;
        struct codec_record r;
        char why[64];
        if (codec_parse_record(buf + at, len, &r, why, sizeof why) == 0 && r.type == 'D' &&
            r.bytes == bytes && r.chain == chain)
            return true;
        at += len;
    }
    memmove(buf, buf + at, *have - at);
    *have -= at;
    return false;
}

/* Whether a connection knocks on a listening socket (-1: none). */
static bool knocked(int fd)
{
    struct pollfd k = {.fd = fd, .events = POLLIN};
    return fd >= 0 && poll(&k, 1, 0) > 0;
}

/* Read what the sender still sends, for DRAIN_SECS or to its end; with w,
 * until its 'D' for this answer, w's deadline, or a knock once DRAIN_SECS
 * have passed without it (a live sender says it within a round trip, and
 * a stranger's knock must not cut its word short). */
static void drain(struct session_in *s, const struct answer_wait *w, uint64_t bytes,
                  uint64_t chain, atomic_bool *halt)
{
    double start = clock_now(), deadline = w ? w->until : start + DRAIN_SECS;
    unsigned char sink[16384], recs[2 * CODEC_RECORD_MAX];
    size_t have = 0;
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0 || (w && clock_now() - start >= DRAIN_SECS && knocked(w->knock_fd)))
            return;
        /* short slices while a knock may come: it has no event here */
        int ms = w && w->knock_fd >= 0 && left > 0.1 ? 100 : (int)(left * 1000) + 1;
        if (s->t->ops->wait(s->t, POLLIN, ms, halt) != 0) {
            if (errno == ETIMEDOUT)
                continue;
            return;
        }
        ssize_t r = s->t->ops->read(s->t, sink, sizeof sink, ms, halt);
        if (r < 0 && errno == ETIMEDOUT)
            continue;
        if (r <= 0)
            return;
        for (size_t off = 0; w && off < (size_t)r;) {
            size_t take = sizeof recs - have < (size_t)r - off ? sizeof recs - have
                                                               : (size_t)r - off;
            memcpy(recs + have, sink + off, take);
            have += take;
            off += take;
            if (found_done(recs, &have, bytes, chain)) {
                s->answer_read = true;
                return;
            }
        }
    }
}

int session_answer(struct session_in *s, int code, uint64_t bytes, uint64_t chain,
                   const char *msg, const struct answer_wait *w, atomic_bool *halt)
{
    unsigned char rec[CODEC_RECORD_MAX];
    size_t n = codec_status(rec, code, bytes, chain, msg);
    atomic_bool never = false;
    /* first the rest of a keepalive that was under way (sealed already) */
    for (size_t off = 0; off < s->len;) {
        struct iovec iov = {s->out + off, s->len - off};
        ssize_t wr = io_writev(s->t->fd, &iov, 1, 10000, &never);
        transport_count(s->t->wire_tx, wr);
        if (wr < 0)
            return -1;
        off += (size_t)wr;
    }
    if (s->t->sealed)
        transport_sealed_last(s->t);   /* the answer ends this direction */
    if (transport_write_all(s->t, rec, n, 10000, &never) != 0)
        return -1;
    s->len = 0;
    if (shutdown(s->t->fd, SHUT_WR) != 0)
        return 0;
    drain(s, w, bytes, chain, halt);
    return 0;
}

/* ---- the handshake of a connecting end ------------------------------------ */

/* A reset met during the handshake, reading or writing. */
static int handshake_reset(struct weir_error *e, const char *name)
{
    return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection was reset during the handshake "
                     "(by a receiver that does not have this key, or on the way)", name);
}

/* The peer's next flight of the handshake into in: STEP_OK with *n bytes,
 * STEP_STOP, or STEP_FAIL with the cause (closed, reset, silent past the
 * deadline). */
static int read_flight(struct transport *t, unsigned char *in, size_t cap, size_t *n,
                       double deadline, double limit, atomic_bool *stop, struct weir_error *e)
{
    double left = deadline - clock_now();
    ssize_t r = left > 0 ? t->ops->read(t, in, cap, (int)(left * 1000) + 1, stop)
                         : (errno = ETIMEDOUT, -1);
    if (r > 0) {
        *n = (size_t)r;
        return STEP_OK;
    }
    if (r < 0 && errno == ECANCELED)
        return STEP_STOP;
    if (r == 0)
        error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver closed the connection "
                  "during the handshake (does it have this key?)", t->name);
    else if (errno == ECONNRESET)
        handshake_reset(e, t->name);
    else if (errno == ETIMEDOUT)
        error_set(e, WEIR_EXIT_NETWORK, "%s: no handshake within %g s", t->name, limit);
    else
        error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: handshake", t->name);
    return STEP_FAIL;
}

/* The handshake done: its keys seal the transport, and what the peer sent
 * after its last flight (at most one read's worth, and that read was at
 * most cap) is the sealed transport's first bytes. */
static int seal_after(struct transport *t, struct tls_handshake *h, unsigned char *in,
                      size_t cap, uint64_t epoch_records, struct weir_error *e)
{
    int rc = STEP_OK;
    struct seal_session *keys = seal_session_new();
    ssize_t left = tls_leftover(h, in, cap);
    if (!keys) {
        error_sys(e, WEIR_EXIT_INTERNAL, errno, "%s: secret memory", t->name);
        rc = STEP_FAIL;
    } else if (left < 0) {
        error_set(e, WEIR_EXIT_INTERNAL, "%s: more bytes after the handshake than weir "
                  "keeps", t->name);
        rc = STEP_FAIL;
    } else if ((keys->epoch_records = epoch_records, tls_export(h, keys, false, e)) ||
               transport_sealed(t, keys, true, 0, in, (size_t)left, e)) {
        rc = STEP_FAIL;
    }
    seal_session_free(keys);
    return rc;
}

/* A weir record where the receiver's handshake should be: a refusal it
 * sent in clear after its greeting (a service, for a sender coming back to
 * a transfer that is over).  True with *e (and errno ECONNREFUSED for an
 * 'S'), false for TLS bytes. */
static bool refused_instead(const unsigned char *in, size_t n, const char *name,
                            struct weir_error *e)
{
    if (n < 8 || codec_get32(in) != CODEC_WEIR_MAGIC)
        return false;   /* a TLS record begins 0x16 0x03 */
    size_t len = codec_record_length(in);
    struct codec_record r;
    char why[96];
    if (len > n || codec_parse_record(in, len, &r, why, sizeof why) || r.type != 'S' ||
        r.code == 0) {
        error_set(e, WEIR_EXIT_NETWORK, "%s: a weir record in place of the handshake", name);
        errno = EPROTO;
        return true;
    }
    error_set(e, WEIR_EXIT_NETWORK, "receiver: %s", r.msg);
    errno = ECONNREFUSED;
    return true;
}

int session_handshake(struct transport *t, struct tls_context *ctx, double limit,
                      uint64_t epoch_records, atomic_bool *stop, const char *label,
                      unsigned char *secret, size_t secretlen, struct weir_error *e)
{
    struct tls_handshake *h;
    if (tls_handshake_new(&h, ctx, e))
        return STEP_FAIL;
    static const size_t cap = 16384;
    unsigned char *in = malloc(cap), *out = malloc(cap);
    double deadline = clock_now() + limit;
    int rc = in && out ? STEP_OK : STEP_FAIL;
    if (rc != STEP_OK)
        error_set(e, WEIR_EXIT_INTERNAL, "%s: out of memory", t->name);
    size_t n = 0;
    for (int st = TLS_WANT; rc == STEP_OK;) {
        size_t outlen = cap;
        st = tls_step(h, in, n, out, &outlen, e);
        if (outlen > 0 && transport_write_all(t, out, outlen,
                                              (int)((deadline - clock_now()) * 1000) + 1, stop))
            rc = errno == ECANCELED ? STEP_STOP
                 : errno == ECONNRESET || errno == EPIPE
                     ? (handshake_reset(e, t->name), STEP_FAIL)
                     : (error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: handshake", t->name),
                        STEP_FAIL);
        if (rc != STEP_OK || st == TLS_DONE)
            break;
        if (st == TLS_FAILED) {
            char why[WEIR_ERROR_MAX];
            snprintf(why, sizeof why, "%s", e->msg);
            error_set(e, WEIR_EXIT_NETWORK, "%s: %s", t->name, why);
            rc = STEP_FAIL;
            break;
        }
        rc = read_flight(t, in, cap, &n, deadline, limit, stop, e);
        if (rc == STEP_OK && refused_instead(in, n, t->name, e))
            rc = STEP_FAIL;
    }
    if (rc == STEP_OK && label && tls_export_bytes(h, label, secret, secretlen, e))
        rc = STEP_FAIL;
    if (rc == STEP_OK)
        rc = seal_after(t, h, in, cap, epoch_records, e);
    int why = errno;   /* ECONNREFUSED: the receiver refused in clear */
    tls_handshake_free(h);
    free(in);
    free(out);
    errno = why;
    return rc;
}
