/*
 * transport_sealed.c - a TCP connection whose bytes travel in weir's sealed
 * records (seal.h), after the TLS handshake.  See src/transport/transport.h.
 *
 * Each direction is used by one thread: the reader (or a sender's back
 * channel) opens, the writer (or a receiver's main thread) seals, so the
 * two halves share nothing but the descriptor.  A write is one record; a
 * read hands out one record's plaintext, opened in order, and a direction
 * that ends without its END record is reported as cut short.
 */
#include <errno.h>
#include <poll.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/io.h"
#include "crypto/seal.h"
#include "format/codec.h"
#include "transport/transport.h"

struct sealed {
    struct seal_session *keys; /* secret memory (secret.h) */
    bool sender;               /* sends to_receiver, reads to_sender */
    /* the reading half */
    struct sealer rx;
    uint64_t rx_next;
    uint64_t rx_ctl;           /* the next control record's number */
    bool rx_ended;             /* the END record arrived */
    unsigned char *rbuf;       /* one record as it arrives */
    size_t rhave;
    unsigned char *plain;      /* its plaintext, handed out from ppos */
    size_t plen, ppos;
    /* the writing half */
    struct sealer tx;
    uint64_t tx_next;
    uint64_t tx_sent;          /* data records that went out whole: what an abort says */
    uint64_t tx_ctl;
    bool tx_last;              /* the next record ends the direction */
    bool tx_control;           /* the next record is a control record */
    bool tx_broken;            /* a record went out in part: nothing may follow */
    unsigned char *wbuf;
};

#define RECORD_MAX (SEAL_MAX_PLAIN + SEAL_OVERHEAD)

/* Read into rbuf until it holds want bytes: 1 done, 0 clean end before any
 * byte of the record, -1 errno. */
static int fill_to(struct transport *t, struct sealed *s, size_t want, int timeout_ms,
                   atomic_bool *stop)
{
    while (s->rhave < want) {
        ssize_t r = io_read(t->fd, s->rbuf + s->rhave, want - s->rhave, timeout_ms, stop);
        transport_count(t->wire_rx, r);
        if (r < 0)
            return -1;
        if (r == 0) {
            if (s->rhave == 0)
                return 0;
            errno = EPIPE;
            return -1;
        }
        s->rhave += (size_t)r;
    }
    return 1;
}

/* A control record begins with the number of data records its sender had
 * sent whole before it (u64, little-endian, as every number of weir's): an
 * attacker on the path who drops data records cannot deliver the abort in
 * their place.  0 when it matches the data records read, and the count is
 * taken off the plaintext. */
static int control_count(const struct sealed *s, unsigned char *plain, size_t *len)
{
    if (*len < 8 || codec_get64(plain) != s->rx_next)
        return -1;
    *len -= 8;
    memmove(plain, plain + 8, *len);
    return 0;
}

/* Open the next record into dst when its plaintext fits in room bytes,
 * else into s->plain.  1 with *len (the plaintext is in dst when *direct),
 * 0 at the clean end, -1 errno.  A failed open leaves nothing readable in
 * either place. */
static int next_record(struct transport *t, struct sealed *s, unsigned char *dst,
                       size_t room, size_t *len, bool *direct, int timeout_ms,
                       atomic_bool *stop)
{
    int r = fill_to(t, s, SEAL_HEADER, timeout_ms, stop);
    if (r <= 0) {
        if (r == 0)
            errno = s->rx_ended ? 0 : EPIPE;   /* a clean end needs the END record first */
        return r == 0 && s->rx_ended ? 0 : -1;
    }
    if (s->rx_ended) {
        errno = EPROTO;   /* nothing may follow the END record */
        return -1;
    }
    long body = seal_body_length(s->rbuf);
    if (body < 0) {
        errno = EBADMSG;
        return -1;
    }
    if (fill_to(t, s, SEAL_HEADER + (size_t)body, timeout_ms, stop) <= 0) {
        if (errno == 0)
            errno = EPIPE;
        return -1;
    }
    unsigned flags;
    bool control = s->rbuf[5] & SEAL_CTRL;   /* authenticated: it is associated data */
    uint64_t n = control ? SEAL_CONTROL | s->rx_ctl : s->rx_next;
    /* seal_body_length accepted it, so the body holds at least the tag */
    *direct = (size_t)body - SEAL_TAG_BYTES <= room;
    if (open_record(&s->rx, n, s->rbuf, SEAL_HEADER + (size_t)body,
                    *direct ? dst : s->plain, len, &flags)) {
        errno = EBADMSG;   /* forged, corrupt, reordered or replayed */
        return -1;
    }
    if (control && control_count(s, *direct ? dst : s->plain, len) != 0) {
        errno = EBADMSG;   /* data records were dropped before it */
        return -1;
    }
    if (control)
        s->rx_ctl++;
    else
        s->rx_next++;
    /* what arrived with the handshake may hold more than this record */
    size_t used = SEAL_HEADER + (size_t)body;
    if (s->rhave > used)
        memmove(s->rbuf, s->rbuf + used, s->rhave - used);
    s->rhave -= used;
    if (flags & SEAL_END)
        s->rx_ended = true;
    return 1;
}

/* A record whose plaintext fits in the caller's buffer is opened straight
 * into it; a larger one is opened aside and handed out in pieces. */
static ssize_t sealed_read(struct transport *t, void *buf, size_t n, int timeout_ms,
                           atomic_bool *stop)
{
    struct sealed *s = t->sealed;
    while (s->ppos == s->plen) {
        size_t len;
        bool direct;
        int r = next_record(t, s, buf, n, &len, &direct, timeout_ms, stop);
        if (r <= 0)
            return r;
        if (direct) {
            if (len > 0)
                return (ssize_t)len;
            continue;   /* an empty record: read on */
        }
        s->plen = len;
        s->ppos = 0;
    }
    size_t take = s->plen - s->ppos < n ? s->plen - s->ppos : n;
    memcpy(buf, s->plain + s->ppos, take);
    s->ppos += take;
    return (ssize_t)take;
}

size_t transport_seal(struct transport *t, const void *plain, size_t len, unsigned char *out)
{
    struct sealed *s = t->sealed;
    unsigned flags = (s->tx_last ? SEAL_END : 0) | (s->tx_control ? SEAL_CTRL : 0);
    if (s->tx_control) {
        unsigned char count[8];
        codec_put64(count, s->tx_sent);
        struct iovec iov[2] = {{count, sizeof count}, {(void *)plain, len}};
        size_t total = seal_record_iov(&s->tx, SEAL_CONTROL | s->tx_ctl, flags, iov, 2, out);
        s->tx_ctl += total > 0;
        return total;
    }
    size_t total = seal_record(&s->tx, s->tx_next, flags, plain, len, out);
    s->tx_next += total > 0;
    return total;
}

void transport_sealed_sent(struct transport *t, uint64_t next)
{
    t->sealed->tx_sent = next;
}

uint64_t transport_sealed_numbers(struct transport *t, uint64_t k)
{
    struct sealed *s = t->sealed;
    uint64_t first = s->tx_next;
    s->tx_next += k;
    return first;
}

void transport_sealed_tx(const struct transport *t, struct seal_direction *dir,
                         uint64_t *epoch_records)
{
    const struct sealed *s = t->sealed;
    *epoch_records = s->keys->epoch_records;
    *dir = s->sender ? s->keys->to_receiver : s->keys->to_sender;
}

void transport_sealed_control(struct transport *t)
{
    t->sealed->tx_control = true;
}

void transport_sealed_broken(struct transport *t)
{
    t->sealed->tx_broken = true;
}

bool transport_sealed_intact(const struct transport *t)
{
    return !t->sealed->tx_broken;
}

/* One record: everything given (up to the largest record), sealed and
 * written whole.  An interrupted record cannot be finished later: an abort
 * after it resets the connection. */
static ssize_t sealed_writev(struct transport *t, const struct iovec *iov, int cnt,
                             int timeout_ms, atomic_bool *stop)
{
    struct sealed *s = t->sealed;
    if (s->tx_broken) {
        errno = EPIPE;
        return -1;
    }
    unsigned char *plain = s->wbuf + RECORD_MAX;
    size_t len = 0;
    for (int i = 0; i < cnt && len < SEAL_MAX_PLAIN; i++) {
        size_t take = iov[i].iov_len < SEAL_MAX_PLAIN - len ? iov[i].iov_len
                                                             : SEAL_MAX_PLAIN - len;
        memcpy(plain + len, iov[i].iov_base, take);
        len += take;
    }
    bool control = s->tx_control;
    uint64_t n = control ? s->tx_ctl : s->tx_next;
    size_t total = transport_seal(t, plain, len, s->wbuf);
    if (total == 0) {
        errno = EIO;
        return -1;
    }
    struct iovec out = {s->wbuf, total};
    struct iovec *v = &out;
    int left = 1;
    size_t sent = 0;
    while (left > 0) {
        ssize_t w = io_writev(t->fd, v, left, timeout_ms, stop);
        transport_count(t->wire_tx, w);
        if (w < 0) {
            /* a record in part: nothing may follow; none of it: its number
             * is the next record's, so that the numbers keep no hole (the
             * sealed bytes never left) */
            s->tx_broken = sent > 0;
            if (sent == 0)
                *(control ? &s->tx_ctl : &s->tx_next) = n;
            return -1;
        }
        sent += (size_t)w;
        io_iov_advance(&v, &left, (size_t)w);
    }
    if (!control)
        s->tx_sent = n + 1;
    return (ssize_t)len;
}

void transport_sealed_last(struct transport *t)
{
    t->sealed->tx_last = true;
}

static int sealed_wait(struct transport *t, short events, int timeout_ms, atomic_bool *stop)
{
    struct sealed *s = t->sealed;
    if ((events & POLLIN) && (s->ppos < s->plen || s->rhave > 0))
        return 0;
    return io_wait(t->fd, events, timeout_ms, stop);
}

static void sealed_release(struct transport *t)
{
    struct sealed *s = t->sealed;
    if (!s)
        return;
    sealer_free(&s->rx);
    sealer_free(&s->tx);
    seal_session_free(s->keys);
    if (s->plain)
        OPENSSL_cleanse(s->plain, s->plen);
    free(s->rbuf);
    free(s->plain);
    free(s->wbuf);
    free(s);
    t->sealed = NULL;
}

static int sealed_close(struct transport *t, bool success, atomic_bool *stop,
                        struct weir_error *err)
{
    const struct transport_ops *tcp = t->plain_ops;
    int rc = tcp->close(t, success, stop, err);
    sealed_release(t);
    return rc;
}

static int sealed_half_close(struct transport *t, struct weir_error *err)
{
    return t->plain_ops->half_close(t, err);
}

static void sealed_abort(struct transport *t)
{
    t->plain_ops->abort(t);
}

static const struct transport_ops sealed_ops = {
    .read = sealed_read, .writev = sealed_writev, .wait = sealed_wait,
    .half_close = sealed_half_close, .abort = sealed_abort, .close = sealed_close,
};

int transport_sealed(struct transport *t, const struct seal_session *keys, bool sender,
                     uint64_t rx_first, const unsigned char *leftover, size_t nleft,
                     struct weir_error *err)
{
    struct sealed *s = calloc(1, sizeof *s);
    if (!s)
        return error_set(err, WEIR_EXIT_INTERNAL, "%s: out of memory", t->name);
    t->sealed = s;
    s->keys = seal_session_new();
    if (s->keys)
        *s->keys = *keys;
    s->sender = sender;
    s->rbuf = malloc(RECORD_MAX);
    s->plain = malloc(SEAL_MAX_PLAIN);
    s->wbuf = malloc(RECORD_MAX + SEAL_MAX_PLAIN);
    const struct seal_direction *out = sender ? &keys->to_receiver : &keys->to_sender;
    const struct seal_direction *in = sender ? &keys->to_sender : &keys->to_receiver;
    if (!s->keys || !s->rbuf || !s->plain || !s->wbuf || nleft > RECORD_MAX ||
        sealer_init(&s->tx, out, keys->epoch_records, err) ||
        sealer_init(&s->rx, in, keys->epoch_records, err)) {
        sealed_release(t);
        return error_set(err, WEIR_EXIT_INTERNAL, "%s: cannot set up encryption", t->name);
    }
    if (nleft > 0)
        memcpy(s->rbuf, leftover, nleft);
    s->rhave = nleft;
    s->rx_next = rx_first;
    t->plain_ops = t->ops;
    t->ops = &sealed_ops;
    return 0;
}
