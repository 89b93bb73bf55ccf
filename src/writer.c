/*
 * writer.c - one writer thread per output, and the back channel of an
 * output that sends a weir stream over TCP.  See the essay at the top of
 * pipeline.c.
 *
 * A writer connects (for -O), then copies published bytes from its cursor
 * to its output.  A TCP output that is not --raw wraps raw data as a weir
 * stream of stored blocks (FRAME_STORED): each write becomes one verified
 * block, sent with writev() so the data is not copied.  With -z the buffer
 * already holds a weir stream and is written as it is.  At the end a weir
 * sender half-closes the connection and waits for the receiver's answer,
 * which the back-channel thread reads; only a success answer makes the
 * output complete.  That thread also hears an early failure while data is
 * still flowing, and then stops this output at once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pipeline_int.h"
#include "weir/codec.h"
#include "weir/io.h"
#include "weir/listener.h"
#include "weir/sync.h"

/* The buffer ran dry for every live writer: the input sets the pace. */
static void writer_wait_locked(struct pipeline *p, struct output *o)
{
    o->waiting = true;
    int waiting = 0;
    for (int i = 0; i < p->nout; i++)
        waiting += !p->out[i].dead && p->out[i].waiting;
    if (waiting == p->live && p->t_start > 0 && !p->input_done && p->empty_since < 0) {
        p->empty_since = clock_now();
        p->empty_on_workers = p->ready < p->head;   /* waiting for a worker */
        if (p->o->start_write_pct > 0 && p->ready == p->head && p->tail == p->head)
            p->gate_open = false;   /* -P: fill to the mark again before writing */
    }
    sync_wait(&p->data_cv, &p->lock);
    o->waiting = false;
    if (p->empty_since >= 0) {
        double waited = clock_now() - p->empty_since;
        if (p->empty_on_workers)
            p->t_workers += waited;
        else
            p->t_empty += waited;
        p->empty_since = -1;
    }
}

/* 1: (*src, *n) is data to write; 0: everything is written; -1: stopping. */
static int writer_next(struct output *o, const unsigned char **src, size_t *n)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    int rc = -1;
    while (!atomic_load(&o->halt)) {
        if (o->seq < p->ready) {
            struct slot *s = &p->ring[o->seq & p->mask];
            if (s->len > o->off && p->gate_open) {
                *src = pool_data(&p->pool, s->block) + o->off;
                *n = s->len - o->off;
                rc = 1;
                break;
            }
            if (s->sealed && o->off == s->len) {
                o->seq++;
                o->off = 0;
                release_locked(p);
                continue;
            }
        } else if (p->input_done && o->seq == p->head) {
            rc = 0;
            break;
        }
        writer_wait_locked(p, o);
    }
    sync_unlock(&p->lock);
    return rc;
}

static void writer_advance(struct output *o, size_t n)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    o->off += n;
    o->bytes += n;
    struct slot *s = &p->ring[o->seq & p->mask];
    if (s->sealed && o->off == s->len) {
        o->seq++;
        o->off = 0;
    }
    release_locked(p);
    sync_unlock(&p->lock);
}

static int write_error(struct output *o, struct weir_error *e, const char *what)
{
    int status = o->ep.is_socket ? WEIR_EXIT_NETWORK : WEIR_EXIT_OUTPUT;
    if (errno == ECANCELED)
        return -1;
    if (errno == ETIMEDOUT)
        error_set(e, status, "%s: no progress for %g s", o->ep.name, o->p->o->io_timeout);
    else if (errno == EPIPE && !o->ep.is_socket)
        error_set(e, status, "%s: %s: Broken pipe (the reader closed it early)", o->ep.name,
                  what);
    else
        error_sys(e, status, errno, "%s: %s", o->ep.name, what);
    return 1;
}

/* Send raw data as one stored block of a weir stream. */
static ssize_t write_framed(struct output *o, const unsigned char *src, size_t n, int tmo)
{
    struct pipeline *p = o->p;
    unsigned char prefix[CODEC_FRAME_PREFIX], suffix[CODEC_FRAME_SUFFIX];
    if (n > p->wire_block_max)
        n = p->wire_block_max;
    uint64_t hash = codec_block_hash(src, n, o->frame_seq);
    codec_frame_prefix(prefix, p->wire_block_max, (uint32_t)n, true);
    codec_frame_suffix(suffix, o->frame_seq, (uint32_t)n, hash);
    struct iovec iov[3] = {{prefix, sizeof prefix}, {(void *)src, n}, {suffix, sizeof suffix}};
    if (io_writev_all(o->ep.fd, iov, 3, tmo, &o->halt))
        return -1;
    o->frame_seq++;
    o->frame_total += n;
    o->frame_chain = codec_chain(o->frame_chain, hash, (uint32_t)n);
    return (ssize_t)n;
}

/* 0: every byte was written; 1: failed, *e says why; -1: stopped. */
static int writer_loop(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int tmo = io_timeout_ms(p, &o->ep);
    for (;;) {
        const unsigned char *src;
        size_t n;
        int r = writer_next(o, &src, &n);
        if (r <= 0)
            return r;
        n = ratelimit_chunk(&o->rl, n);
        ssize_t w = o->framing == FRAME_STORED ? write_framed(o, src, n, tmo)
                                               : io_write(o->ep.fd, src, n, tmo, &o->halt);
        if (w < 0)
            return write_error(o, e, "write");
        writer_advance(o, (size_t)w);
        if (ratelimit_take(&o->rl, (size_t)w, &o->halt))
            return -1;
    }
}

/* ---- the receiver's greeting, keepalives and answer --------------------- */

static int map_receiver_status(int code)
{
    /* its output failing or the data arriving corrupt keep their meaning;
     * anything else is, from here, a failure of the far end */
    return code == WEIR_EXIT_OUTPUT || code == WEIR_EXIT_INTEGRITY ? code : WEIR_EXIT_NETWORK;
}

#define NOT_WEIR "it does not seem to be weir (nc -l, socat and mbuffer take plain bytes: " \
                 "weir --raw)"

/* Read one record from the receiver.  0 and *r; -1 with *e (errno
 * ECANCELED when stopping, ETIMEDOUT after timeout_ms without a byte);
 * *got says how many bytes arrived, *eof whether the connection closed. */
static int receive_record(struct output *o, int timeout_ms, struct codec_record *r,
                          unsigned char *rec, size_t *got, bool *eof, struct weir_error *e)
{
    *got = 0;
    *eof = false;
    ssize_t n = io_read_full(o->ep.fd, rec, 8, timeout_ms, &o->halt);
    size_t len = n == 8 ? codec_record_length(rec) : 0;
    if (n == 8 && len > 8) {
        ssize_t m = io_read_full(o->ep.fd, rec + 8, len - 8, timeout_ms, &o->halt);
        n = m < 0 ? m : 8 + m;
    }
    if (n < 0) {
        int en = errno;
        if (en != ECANCELED)
            error_sys(e, WEIR_EXIT_NETWORK, en, "%s", o->ep.name);
        errno = en;
        return -1;
    }
    *got = (size_t)n;
    char why[96];
    if (n == 8 && len == 0)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver answered with garbage",
                         o->ep.name);
    if ((size_t)n < 8 || (size_t)n < len) {
        *eof = true;
        return error_set(e, WEIR_EXIT_NETWORK,
                         "%s: the receiver closed the connection without an answer",
                         o->ep.name);
    }
    if (codec_parse_record(rec, len, r, why, sizeof why))
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver answered with garbage (%s)",
                         o->ep.name, why);
    return 0;
}

/* Before a weir sender writes anything, the receiver must greet it: that is
 * how a sender learns it talks to weir and not to nc -l or mbuffer, whose
 * output would otherwise receive weir's framing. */
static int read_greeting(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    double limit = LISTENER_HANDSHAKE_SECS;
    if (p->o->io_timeout > 0 && p->o->io_timeout < limit)
        limit = p->o->io_timeout;
    unsigned char rec[CODEC_RECORD_MAX];
    struct codec_record r;
    size_t got;
    bool eof;
    if (receive_record(o, (int)(limit * 1000), &r, rec, &got, &eof, e) == 0) {
        if (r.type != 'G' || r.role != CODEC_ROLE_RECEIVER)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer did not greet as a weir "
                             "receiver", o->ep.name);
        if (!codec_protocol_compatible(&r))
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver speaks weir protocol %u "
                             "to %u, this weir %u to %u: upgrade the older one", o->ep.name,
                             r.oldest, r.version, CODEC_PROTOCOL_OLDEST, CODEC_PROTOCOL);
        o->peer_features = r.features & CODEC_FEATURES;
        o->last_heard = clock_now();
        return 0;
    }
    if (atomic_load(&o->halt))
        return -1;
    if (got >= 4 && codec_get32(rec) != CODEC_WEIR_MAGIC) {
        char start[25];
        size_t j = 0;
        for (size_t i = 0; i < got && j + 1 < sizeof start; i++)
            start[j++] = rec[i] >= 0x20 && rec[i] < 0x7f ? (char)rec[i] : '.';
        start[j] = '\0';
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer sent '%s', not a weir greeting: "
                         NOT_WEIR, o->ep.name, start);
    }
    if (eof)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer closed the connection without "
                         "a weir greeting: " NOT_WEIR, o->ep.name);
    if (got == 0 && errno == ETIMEDOUT)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: no weir greeting within %g s: " NOT_WEIR,
                         o->ep.name, limit);
    return -1;   /* *e says why */
}

void *backchannel_main(void *arg)
{
    struct output *o = arg;
    struct pipeline *p = o->p;
    struct weir_error e;
    thread_unblock_wake();
    int rc;
    for (;;) {
        unsigned char rec[CODEC_RECORD_MAX];
        struct codec_record r;
        size_t got;
        bool eof;
        rc = receive_record(o, -1, &r, rec, &got, &eof, &e);
        if (rc != 0)
            break;
        sync_lock(&p->lock);
        o->last_heard = clock_now();
        if (r.type == 'K') {
            o->peer_written = r.bytes;
            sync_unlock(&p->lock);
            continue;
        }
        if (r.type == 'S') {
            o->status_code = r.code;
            o->status_bytes = r.bytes;
            snprintf(o->status_msg, sizeof o->status_msg, "%s", r.msg);
            o->status_received = true;
            sync_broadcast(&p->data_cv);
        }
        sync_unlock(&p->lock);
        if (r.type != 'S') {
            rc = error_set(&e, WEIR_EXIT_NETWORK, "%s: unexpected '%c' record from the "
                           "receiver", o->ep.name, r.type);
        } else if (r.code != 0) {
            rc = error_set(&e, map_receiver_status(r.code), "receiver: %s", r.msg);
        }
        break;
    }
    if (rc != 0 && atomic_load(&o->halt) && !o->status_received)
        rc = 0;   /* this side is stopping anyway */
    if (rc != 0) {
        output_fail(o, &e);
        shutdown(o->ep.fd, SHUT_RDWR);   /* wakes the writer out of send() */
    }
    sync_lock(&p->lock);
    o->bc_running = false;
    sync_broadcast(&p->data_cv);
    sync_unlock(&p->lock);
    return NULL;
}

static void start_backchannel(struct output *o)
{
    sync_lock(&o->p->lock);
    o->bc_running = true;
    sync_unlock(&o->p->lock);
    sync_create(&o->backchannel, backchannel_main, o);
    o->has_backchannel = true;
}

/* After the last byte: end the stream and wait for the receiver's verdict.
 * --timeout bounds the silence, not the wait: a receiver draining into a
 * slow consumer keeps saying so.  0: it confirmed every byte; 1: *e says
 * what went wrong; -1: stopping. */
static int await_answer(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    if (shutdown(o->ep.fd, SHUT_WR) != 0)
        return write_error(o, e, "shutdown");
    double limit = p->o->io_timeout;
    if (limit > 0 && limit < CODEC_SILENCE_MIN)
        limit = CODEC_SILENCE_MIN;
    bool silence = (o->peer_features & CODEC_FEATURE_KEEPALIVE) != 0;
    if (!silence)
        o->last_heard = clock_now();   /* a receiver without keepalives: bound the wait */
    sync_lock(&p->lock);
    bool timed_out = false;
    while (!o->status_received && !o->dead && !atomic_load(&o->halt) && o->bc_running) {
        if (limit > 0) {
            struct timespec deadline = clock_deadline(o->last_heard + limit - clock_now());
            if (clock_now() >= o->last_heard + limit) {
                timed_out = true;
                break;
            }
            sync_wait_until(&p->data_cv, &p->lock, &deadline);
        } else {
            sync_wait(&p->data_cv, &p->lock);
        }
    }
    bool received = o->status_received;
    int code = o->status_code;
    uint64_t acked = o->status_bytes;
    sync_unlock(&p->lock);
    if (received && code != 0)
        return error_set(e, map_receiver_status(code), "receiver: %s", o->status_msg), 1;
    if (!received && timed_out)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver fell silent for %g s "
                         "before it answered", o->ep.name, limit), 1;
    if (!received)
        return -1;   /* stopping, or the back channel has reported the failure */
    uint64_t sent = o->framing == FRAME_STORED ? o->frame_total : p->data_bytes;
    if (acked != sent)
        return error_set(e, WEIR_EXIT_NETWORK,
                         "%s: the receiver confirmed %llu bytes, but %llu were sent",
                         o->ep.name, (unsigned long long)acked, (unsigned long long)sent), 1;
    return 0;
}

/* The stream header, and before it on a connection to a weir receiver the
 * greeting: one write, as soon as the output is open. */
static int writer_open(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    if (o->spec->kind == OUTPUT_TCP) {
        if (tcp_connect(o->spec, p->o, &o->halt, p->log, &o->ep, e))
            return atomic_load(&o->halt) ? -1 : 1;
        if (o->expects_status) {
            int rc = read_greeting(o, e);
            if (rc != 0)
                return atomic_load(&o->halt) ? -1 : 1;
            start_backchannel(o);
        }
    }
    unsigned char hello[CODEC_GREETING_SIZE + CODEC_HEADER_SIZE];
    size_t n = 0;
    if (o->expects_status)
        n += codec_greeting(hello, CODEC_ROLE_SENDER, CODEC_FEATURES);
    if (o->framing == FRAME_STORED) {
        codec_header(hello + n, p->wire_block_max, 0);
        o->frame_chain = codec_chain_start(hello + n);
        n += CODEC_HEADER_SIZE;
    } else if (o->framing == FRAME_ENCODED) {
        n += codec_header(hello + n, (uint32_t)p->unit, CODEC_HEADER_COMPRESSED);
    }
    o->spoke = true;
    if (n > 0 && io_write_all(o->ep.fd, hello, n, io_timeout_ms(p, &o->ep), &o->halt))
        return write_error(o, e, "write");
    return 0;
}

/* Finish a complete output: trailer, answer, close.  0, 1 with *e, or -1. */
static int writer_end(struct output *o, struct weir_error *e)
{
    if (o->framing == FRAME_STORED) {
        unsigned char tr[CODEC_TRAILER_SIZE];
        codec_trailer(tr, o->frame_total, o->frame_seq, o->frame_chain);
        if (io_write_all(o->ep.fd, tr, sizeof tr, io_timeout_ms(o->p, &o->ep), &o->halt))
            return write_error(o, e, "write");
    }
    if (o->expects_status)
        return await_answer(o, e);
    if (o->ep.is_socket && shutdown(o->ep.fd, SHUT_WR) != 0)
        return write_error(o, e, "shutdown");
    return 0;
}

/* An unfinished TCP stream must not look like a clean end to the peer. */
static void writer_abort(struct output *o)
{
    if (o->ep.fd < 0 || !o->ep.is_socket)
        return;
    /* only a peer that greeted as weir gets weir's abort record */
    if (o->expects_status && o->spoke) {
        unsigned char rec[CODEC_STATUS_FIXED + CODEC_STATUS_MAX];
        struct pipeline *p = o->p;
        sync_lock(&p->lock);
        struct weir_error why = p->first;
        bool failed = p->failed;
        sync_unlock(&p->lock);
        size_t n = codec_abort(rec, failed ? why.status : WEIR_EXIT_NETWORK,
                               failed ? why.msg : "sender stopped");
        if (send(o->ep.fd, rec, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            /* best effort: the reset below tells the receiver anyway */
        }
    }
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(o->ep.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

void *writer_main(void *arg)
{
    struct output *o = arg;
    struct pipeline *p = o->p;
    struct weir_error e;
    thread_unblock_wake();
    int rc = writer_open(o, &e);
    if (rc == 0)
        rc = writer_loop(o, &e);
    if (rc == 0)
        rc = writer_end(o, &e);
    /* success is only reported for data a crash cannot take back */
    if (rc == 0 && !p->o->no_sync && endpoint_sync(&o->ep, &e))
        rc = 1;
    if (rc == 1)
        output_fail(o, &e);
    if (rc != 0)
        writer_abort(o);
    if (o->has_backchannel) {
        if (o->ep.fd >= 0)
            shutdown(o->ep.fd, SHUT_RDWR);   /* ends the back channel's read */
        sync_join(o->backchannel);
    }
    int status = o->ep.is_socket ? WEIR_EXIT_NETWORK : WEIR_EXIT_OUTPUT;
    if (endpoint_close(&o->ep, status, &e) && rc == 0)
        output_fail(o, &e);
    thread_done(p, &o->running);
    return NULL;
}
