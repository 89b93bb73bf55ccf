/*
 * reader.c - the reader thread: it opens the input (accepting a connection
 * for -I), decides what the input is, and fills the buffer.  See the essay
 * at the top of pipeline.c.
 *
 *   pass-through   read() into the filling slot, publish after each read
 *   -z             read a block's worth, queue it for a worker to compress;
 *                  the trailer of the weir stream goes in a slot of its own
 *                  (each output writes the header itself)
 *   weir stream    parse frames; stored blocks are read straight into the
 *                  filling slot and verified here, compressed ones go to
 *                  the workers
 *   LZ4 data (-d)  a frame of independent blocks is split into its blocks
 *                  and they go the same ways; its content checksum is
 *                  hashed in order behind them (content_catch_up_locked)
 *                  and compared at the frame's end.  A frame of linked
 *                  blocks is decoded here, in order, by liblz4
 */
#include <errno.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "pipeline_int.h"
#include "weir/codec.h"
#include "weir/io.h"
#include "weir/listener.h"
#include "weir/sync.h"

#define READ_MAX (1u << 20)    /* largest single read(); keeps publishing frequent */
#define IDLE_FLUSH_MS 10       /* -z: compress a partial block after this much quiet */

struct reader {
    struct pipeline *p;
    int timeout_ms;
    int status;          /* exit status for read errors */
    bool timed_out;      /* the last read failed for lack of progress */
    unsigned char *big_in, *big_out;   /* oversize blocks (oversize_block) */
};

/* The stream_source behind every read of the input. */
static ssize_t source_read(void *ctx, void *buf, size_t n)
{
    struct reader *r = ctx;
    struct pipeline *p = r->p;
    if (p->ahead_pos < p->nahead) {
        /* what the listener read while the sender proved itself */
        size_t take = p->nahead - p->ahead_pos < n ? p->nahead - p->ahead_pos : n;
        memcpy(buf, p->ahead + p->ahead_pos, take);
        p->ahead_pos += take;
        atomic_fetch_add(&p->in_bytes, (uint64_t)take);
        return (ssize_t)take;
    }
    if (n > READ_MAX)
        n = READ_MAX;
    n = ratelimit_chunk(&p->read_rl, n);
    ssize_t got = io_read(p->in_ep.fd, buf, n, r->timeout_ms, &p->stop);
    if (got < 0) {
        r->timed_out = errno == ETIMEDOUT;
        return -1;
    }
    if (got > 0) {
        atomic_fetch_add(&p->in_bytes, (uint64_t)got);
        if (ratelimit_take(&p->read_rl, (size_t)got, &p->stop)) {
            errno = ECANCELED;
            return -1;
        }
    }
    return got;
}

/* Wait until every queued block has been decoded and verified. */
static int source_settle(void *ctx)
{
    struct reader *r = ctx;
    struct pipeline *p = r->p;
    sync_lock(&p->lock);
    bool stopped = !wait_settled_locked(p);
    sync_unlock(&p->lock);
    if (stopped)
        errno = ECANCELED;
    return stopped ? -1 : 0;
}

static void reader_fail(struct reader *r, struct weir_error *e)
{
    struct pipeline *p = r->p;
    if (atomic_load(&p->stop))
        return;   /* the failure is the stop itself */
    if (r->timed_out)
        error_set(e, r->status, "%s: no progress for %g s", p->in_ep.name, p->o->io_timeout);
    pipeline_fail(p, e);
}

/* ---- the filling slot --------------------------------------------------- */

static void seal_locked(struct pipeline *p)
{
    if (p->filling) {
        p->ring[(p->head - 1) & p->mask].sealed = true;
        p->filling = false;
        sync_broadcast(&p->data_cv);
    }
}

/* Room for at least want contiguous bytes in the filling slot. */
static bool fill_reserve(struct pipeline *p, size_t want, unsigned char **dst, size_t *cap)
{
    for (;;) {
        sync_lock(&p->lock);
        if (p->filling) {
            struct slot *s = &p->ring[(p->head - 1) & p->mask];
            if (p->unit - s->len >= want) {
                *dst = pool_data(&p->pool, s->block) + s->len;
                *cap = p->unit - s->len;
                sync_unlock(&p->lock);
                return true;
            }
            seal_locked(p);
        }
        sync_unlock(&p->lock);
        uint32_t idx;
        if (!reader_take_block(p, 0, &idx))
            return false;
        sync_lock(&p->lock);
        struct slot *s = &p->ring[p->head & p->mask];
        *s = (struct slot){.block = idx, .present = true};
        p->head++;
        p->filling = true;
        advance_ready_locked(p);
        sync_unlock(&p->lock);
    }
}

static void fill_publish(struct pipeline *p, size_t n)
{
    sync_lock(&p->lock);
    struct slot *s = &p->ring[(p->head - 1) & p->mask];
    s->len += n;
    p->queued_bytes += n;
    p->data_bytes += n;
    if (s->len == p->unit)
        seal_locked(p);
    gate_check_locked(p);
    sync_broadcast(&p->data_cv);
    content_catch_up_locked(p);
    sync_unlock(&p->lock);
}

/* ---- pass-through --------------------------------------------------------- */

static void pass_through(struct reader *r, struct stream_decoder *d)
{
    struct pipeline *p = r->p;
    struct weir_error e;
    for (;;) {
        unsigned char *dst;
        size_t cap;
        if (!fill_reserve(p, 1, &dst, &cap))
            return;
        ssize_t n;
        if (d && d->pos < d->end) {
            n = (ssize_t)stream_take_staged(d, dst, cap);   /* bytes read while sniffing */
        } else {
            n = source_read(r, dst, cap);
            if (n < 0) {
                error_sys(&e, r->status, errno, "%s: read", p->in_ep.name);
                reader_fail(r, &e);
                return;
            }
        }
        if (n == 0)
            return;
        fill_publish(p, (size_t)n);
    }
}

/* ---- -z: compress ------------------------------------------------------- */

/* Make block idx, holding a record of len bytes, the next slot. */
static void install_record_locked(struct pipeline *p, uint32_t idx, size_t len)
{
    p->ring[p->head & p->mask] = (struct slot){.block = idx, .present = true,
                                               .sealed = true, .len = len};
    p->head++;
    p->queued_bytes += len;
    advance_ready_locked(p);
}

/* Fill a staging block: until full, end of input, or a pause in the input.
 * Returns bytes read, or -1 on error; *eof at end of input. */
static ssize_t fill_staging(struct reader *r, unsigned char *buf, bool *eof)
{
    struct pipeline *p = r->p;
    size_t got = 0;
    bool short_read = false;
    while (got < p->unit) {
        if (short_read && got > 0) {
            /* the producer paused: do not hold its data back for long */
            if (io_wait(p->in_ep.fd, POLLIN, IDLE_FLUSH_MS, &p->stop) != 0) {
                if (errno == ETIMEDOUT)
                    break;
                return -1;
            }
        }
        ssize_t n = source_read(r, buf + got, p->unit - got);
        if (n < 0)
            return -1;
        if (n == 0) {
            *eof = true;
            break;
        }
        short_read = (size_t)n < p->unit - got;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static void compress_input(struct reader *r)
{
    struct pipeline *p = r->p;
    struct weir_error e;
    /* every output writes the header itself (FRAME_ENCODED); the chain
     * starts from the same bytes */
    unsigned char rec[CODEC_HEADER_SIZE];
    codec_header(rec, (uint32_t)p->unit, CODEC_HEADER_COMPRESSED);
    sync_lock(&p->lock);
    p->chain = codec_chain_start(rec);
    sync_unlock(&p->lock);
    uint64_t nblocks = 0;
    for (bool eof = false; !eof;) {
        uint32_t idx;
        if (!reader_take_block(p, 1, &idx))
            return;
        ssize_t n = fill_staging(r, pool_data(&p->pool, idx), &eof);
        if (n < 0) {
            error_sys(&e, r->status, errno, "%s: read", p->in_ep.name);
            reader_fail(r, &e);
            return;
        }
        sync_lock(&p->lock);
        if (n == 0) {
            pool_release_locked(&p->pool, idx);
        } else {
            struct job j = {.src = idx, .len = (size_t)n, .blk = {.seq = nblocks++}};
            p->data_bytes += (uint64_t)n;
            job_queue_locked(p, &j);
        }
        sync_unlock(&p->lock);
    }
    /* the trailer needs every block's checksum: wait for the workers */
    uint32_t idx;
    if (!reader_take_block(p, 0, &idx))
        return;
    sync_lock(&p->lock);
    if (!wait_settled_locked(p)) {
        pool_release_locked(&p->pool, idx);
        sync_unlock(&p->lock);
        return;
    }
    codec_trailer(pool_data(&p->pool, idx), p->chain_total, nblocks, p->chain);
    install_record_locked(p, idx, CODEC_TRAILER_SIZE);
    sync_unlock(&p->lock);
}

/* ---- decoding ----------------------------------------------------------- */

static int stored_block(struct pipeline *p, struct stream_decoder *d, struct stream_block *b,
                        struct weir_error *e)
{
    unsigned char *dst;
    size_t cap;
    if (!fill_reserve(p, b->wire_len, &dst, &cap))
        return 1;
    if (stream_payload(d, dst, b->wire_len, e) || stream_block_end(d, b, e) ||
        stream_verify_block(b, dst, dst, (long)b->wire_len, p->in_ep.name, e))
        return -1;
    fill_publish(p, b->wire_len);
    return 0;
}

static int compressed_block(struct pipeline *p, struct stream_decoder *d,
                            struct stream_block *b, struct weir_error *e)
{
    sync_lock(&p->lock);
    seal_locked(p);
    sync_unlock(&p->lock);
    uint32_t idx;
    if (!reader_take_block(p, 1, &idx))
        return 1;
    if (stream_payload(d, pool_data(&p->pool, idx), b->wire_len, e) ||
        stream_block_end(d, b, e))
        return -1;
    sync_lock(&p->lock);
    struct job j = {.src = idx, .len = b->wire_len, .blk = *b};
    job_queue_locked(p, &j);
    sync_unlock(&p->lock);
    return 0;
}

/* A block that may be larger than the buffer's blocks, which were sized to
 * the first stream or frame of the input: a later one may declare larger
 * blocks.  It is decoded and verified here, then published in pieces. */
static int oversize_block(struct reader *r, struct stream_decoder *d, struct stream_block *b,
                          struct weir_error *e)
{
    struct pipeline *p = r->p;
    if (!r->big_in)
        r->big_in = malloc(CODEC_BLOCK_MAX);
    if (!r->big_out)
        r->big_out = malloc(CODEC_BLOCK_MAX);
    if (!r->big_in || !r->big_out)
        return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s: a block larger than the buffer's",
                         p->in_ep.name);
    if (stream_payload(d, r->big_in, b->wire_len, e) || stream_block_end(d, b, e))
        return -1;
    size_t cap = b->lz4 ? b->raw_max : d->block_max;
    long n = codec_decode_block(r->big_in, b->wire_len, b->stored, r->big_out, cap);
    if (stream_verify_block(b, r->big_in, r->big_out, n, p->in_ep.name, e))
        return -1;
    for (size_t off = 0; off < (size_t)n;) {
        unsigned char *dst;
        size_t room;
        if (!fill_reserve(p, 1, &dst, &room))
            return 1;
        size_t take = (size_t)n - off < room ? (size_t)n - off : room;
        memcpy(dst, r->big_out + off, take);
        fill_publish(p, take);
        off += take;
    }
    return 0;
}

/* A block of a weir stream or of a split LZ4 frame, whose payload follows. */
static int decode_block(struct reader *r, struct stream_decoder *d, struct stream_block *b,
                        struct weir_error *e)
{
    struct pipeline *p = r->p;
    uint64_t raw_max = b->lz4 ? b->raw_max : d->block_max;
    if (raw_max > p->unit || b->wire_len > p->unit)
        return oversize_block(r, d, b, e);
    return b->stored ? stored_block(p, d, b, e) : compressed_block(p, d, b, e);
}

/* The buffer's blocks take the size of the first blocks the input declares. */
static int carve(struct reader *r, size_t block, struct weir_error *e)
{
    return pipeline_carve(r->p, block, e);
}

static void decode_weir(struct reader *r, struct stream_decoder *d)
{
    struct weir_error e;
    for (;;) {
        struct stream_block b;
        int rc = stream_next(d, &b, &e);
        if (rc == 0)
            return;
        if (rc > 0)
            rc = decode_block(r, d, &b, &e);
        if (rc > 0)
            return;    /* stopping */
        if (rc < 0) {
            reader_fail(r, &e);
            return;
        }
    }
}

/* A frame to split starts: its content is checked from the next slot on. */
static void lz4_frame_start(struct pipeline *p, const struct stream_decoder *d)
{
    sync_lock(&p->lock);
    seal_locked(p);
    p->content_on = true;
    p->content_seq = p->head;
    p->content_off = 0;
    stream_content_begin(&p->content, &d->frame);
    sync_unlock(&p->lock);
}

/* The frame ended: wait until all of it is decoded and hashed, then judge. */
static int lz4_frame_end(struct pipeline *p, const struct stream_decoder *d,
                         struct weir_error *e)
{
    sync_lock(&p->lock);
    seal_locked(p);
    for (;;) {
        if (atomic_load(&p->stop)) {
            sync_unlock(&p->lock);   /* the cursor keeps holding what it reads */
            return 1;
        }
        content_catch_up_locked(p);
        if (!p->content_busy && p->content_seq == p->head)
            break;
        sync_wait(&p->space_cv, &p->lock);
    }
    p->content_on = false;
    release_locked(p);
    sync_unlock(&p->lock);
    return stream_content_end(&p->content, &d->frame, p->in_ep.name, e) ? -1 : 0;
}

/* A frame of linked blocks, decoded in order. */
static int lz4_linked_frame(struct pipeline *p, struct stream_decoder *d, struct weir_error *e)
{
    for (;;) {
        unsigned char *dst;
        size_t cap, n;
        if (!fill_reserve(p, 1, &dst, &cap))
            return 1;
        if (stream_lz4_read(d, dst, cap, &n, e))
            return -1;
        if (n > 0)
            fill_publish(p, n);
        if (!d->lz4_linked)
            return 0;
    }
}

static void decode_lz4(struct reader *r, struct stream_decoder *d)
{
    struct pipeline *p = r->p;
    struct weir_error e;
    for (;;) {
        struct stream_block b;
        int rc = stream_lz4_next(d, &b, &e);
        switch (rc) {
        case 0:
            return;
        case STREAM_LZ4_FRAME:
            rc = carve(r, d->frame.block_max, &e);
            if (rc == 0)
                lz4_frame_start(p, d);
            break;
        case STREAM_LZ4_BLOCK:
            rc = decode_block(r, d, &b, &e);
            break;
        case STREAM_LZ4_FRAME_END:
            rc = lz4_frame_end(p, d, &e);
            break;
        case STREAM_LZ4_LINKED:
            rc = carve(r, d->frame.block_max, &e);
            if (rc == 0)
                rc = lz4_linked_frame(p, d, &e);
            break;
        default:
            rc = -1;
        }
        if (rc > 0)
            return;    /* stopping */
        if (rc < 0) {
            reader_fail(r, &e);
            return;
        }
    }
}

/* Look at the input and run the matching loop. */
static void read_input(struct reader *r)
{
    struct pipeline *p = r->p;
    const struct weir_options *o = p->o;
    if (p->encode) {
        compress_input(r);
        return;
    }
    if (!p->may_decode) {
        pass_through(r, NULL);
        return;
    }
    struct stream_decoder d;
    struct stream_source src = {.read = source_read, .settle = source_settle, .ctx = r,
                                .error_status = r->status, .name = p->in_ep.name};
    struct weir_error e;
    if (stream_init(&d, &src, &e) || stream_sniff(&d, o->decode, !o->decode, &e)) {
        reader_fail(r, &e);
        stream_free(&d);
        return;
    }
    if (d.kind != STREAM_RAW) {
        sync_lock(&p->lock);
        p->decoding = true;
        sync_unlock(&p->lock);
    }
    if ((d.kind == STREAM_WEIR && carve(r, d.block_max, &e)) ||
        (d.kind == STREAM_RAW && carve(r, o->block, &e))) {
        reader_fail(r, &e);
        stream_free(&d);
        return;
    }
    if (d.kind == STREAM_WEIR) {
        sync_lock(&p->lock);
        p->answer_sender = p->in_ep.is_socket;   /* main now sends keepalives */
        sync_unlock(&p->lock);
        log_msg(p->log, LOG_DEBUG, "%s: weir stream", p->in_ep.name);
        decode_weir(r, &d);
    } else if (d.kind == STREAM_LZ4) {
        decode_lz4(r, &d);
    } else {
        if (p->in_ep.is_socket)
            log_msg(p->log, LOG_INFO, "%s: plain bytes, not a weir stream: its end cannot be "
                    "verified", p->in_ep.name);
        pass_through(r, &d);
    }
    stream_free(&d);
}

/* Admit the first sender that proves itself (listener.c). */
static int accept_sender(struct pipeline *p, struct weir_error *e)
{
    struct listener_config cfg = {.raw = p->o->raw, .accept_timeout = p->o->accept_timeout,
                                  .io_timeout = p->o->io_timeout,
                                  .handshake_timeout = LISTENER_HANDSHAKE_SECS};
    if (p->o->io_timeout > 0 && p->o->io_timeout < cfg.handshake_timeout)
        cfg.handshake_timeout = p->o->io_timeout;
    return listener_admit(&p->listener, &cfg, &p->stop, p->log, &p->in_ep, p->ahead,
                          &p->nahead, e);
}

static int reader_open(struct pipeline *p, struct weir_error *e)
{
    if (p->o->listen && accept_sender(p, e))
        return -1;
    sync_lock(&p->lock);
    p->t_start = clock_now();
    sync_unlock(&p->lock);
    return 0;
}

/* Input ended (or failed): seal the last slot and let the writers drain. */
static void reader_finish(struct pipeline *p)
{
    sync_lock(&p->lock);
    seal_locked(p);
    p->jobs_done = true;
    p->input_done = true;
    p->gate_open = true;
    if (p->t_start > 0)
        p->t_input_end = clock_now();
    sync_broadcast(&p->data_cv);
    sync_broadcast(&p->job_cv);
    sync_unlock(&p->lock);
}

void *reader_main(void *arg)
{
    struct pipeline *p = arg;
    struct weir_error e;
    thread_unblock_wake();
    if (reader_open(p, &e) == 0) {
        struct reader r = {.p = p, .timeout_ms = io_timeout_ms(p, &p->in_ep),
                           .status = p->in_ep.is_socket ? WEIR_EXIT_NETWORK
                                                        : WEIR_EXIT_INPUT};
        read_input(&r);
        free(r.big_in);
        free(r.big_out);
    } else if (!atomic_load(&p->stop)) {
        pipeline_fail(p, &e);
    }
    reader_finish(p);
    /* a weir sender gets an answer from main, which then closes the socket */
    if (!p->answer_sender) {
        if (p->in_ep.is_socket && atomic_load(&p->stop)) {
            /* tell a raw sender plainly that this end gave up */
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(p->in_ep.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        if (endpoint_close(&p->in_ep, WEIR_EXIT_INPUT, &e))
            pipeline_fail(p, &e);
    }
    thread_done(p, &p->reader_running);
    return NULL;
}
