/*
 * reader.c - the reader thread: it opens the input (admitting a sender for
 * -I), decides what the input is, and fills the buffer.  See the essay at
 * the top of pipeline.c.
 *
 *   pass-through   read() into the filling slot, publish after each read
 *   -z             read a block's worth, hash it for the LZ4 frame's
 *                  content checksum (the one sequential step), queue it for
 *                  a worker to compress; the end of the data (the weir
 *                  trailer, the frame's EndMark and content checksum) goes
 *                  in a slot of its own, and each output writes its header
 *                  itself
 *   weir stream    the decoder (decode.c) hands each block to this file's
 *   LZ4 data (-d)  sink: stored blocks are read straight into the filling
 *                  slot and verified here, compressed ones go to the workers;
 *                  a split LZ4 frame's content checksum is hashed in order
 *                  behind them and compared at the frame's end; a frame of
 *                  linked blocks is decoded here, in order, by liblz4;
 *                  legacy LZ4 blocks go to the workers like a frame's
 *
 * Holes: a regular file is read by its data extents (sparse.h); what lies
 * between them is a hole, never read.  With --sparse, the data read is
 * also scanned for grains of zeros, which become holes too (the bytes then
 * pass through a buffer of the reader's own, and are copied once more).
 * A hole goes into the buffer as a slot of its own (ring_add_hole), and
 * -z gives it a number in the weir stream, like a block.  Decoding, the
 * stream's hole records become such slots.
 *
 * Every step returns a weir_step (error.h).  The input is closed before the
 * ring is told it ended, so that a producer's exit status is known before a
 * trailer vouches for the stream.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/sync.h"
#include "format/codec.h"
#include "format/decode.h"
#include "format/sparse.h"
#include "link/listener.h"
#include "link/stripe.h"
#include "linktest/linktest.h"
#include "os/os.h"

#include "engine/reader_int.h"

/* While the session's connection brings data, anyone else who connects
 * is refused at once, as a closed port would have before (the port stays
 * open for the sender's return): told that a transfer is under way, which
 * a sender coming back takes for "not yet".  At most twice a second. */
#define KNOCK_SECS 0.5
static void refuse_others(struct reader *r)
{
    double now = clock_now();
    if (now < r->next_knock)
        return;
    r->next_knock = now + KNOCK_SECS;
    receiver_refuse_others(&r->p->rx);
}

/* The stream_source behind every read of the input. */
/* What the listener read while the sender proved itself, handed on
 * first: the bytes taken, 0 when none is left. */
static size_t take_ahead(struct pipeline *p, void *buf, size_t n)
{
    size_t take = receiver_take_ahead(&p->rx, buf, n);
    atomic_fetch_add(&p->in_bytes, (uint64_t)take);
    atomic_fetch_add(&p->held, (uint64_t)take);
    return take;
}

/* The connection ran dry: a sender that goes on sending needs no
 * confirmation yet; one that stays silent for CONFIRM_IDLE_MS may be
 * waiting for room in its buffer, so it gets one (the read would wait
 * here anyway). */
static void confirm_if_idle(struct reader *r)
{
    struct pipeline *p = r->p;
    if (!r->owe_confirm)
        return;
    r->owe_confirm = false;
    if (p->in.ops->wait(&p->in, POLLIN, CONFIRM_IDLE_MS, &p->stop) != 0 && errno == ETIMEDOUT)
        (void)receiver_confirm(&p->rx, atomic_load(&p->held), true);
}

/* got bytes arrived: count them, confirm them to a sender that may
 * resume (every confirm_every bytes, and once the connection stays idle:
 * each confirmation wakes the sender's back channel and its reader, so a
 * busy connection gets few), refuse other knocks, pace -r.  0, or -1 with
 * ECANCELED. */
static int took(struct reader *r, size_t got, size_t asked)
{
    struct pipeline *p = r->p;
    atomic_fetch_add(&p->in_bytes, (uint64_t)got);
    uint64_t held = atomic_fetch_add(&p->held, (uint64_t)got) + (uint64_t)got;
    r->owe_confirm = receiver_confirm(&p->rx, held, false) && got < asked;
    refuse_others(r);
    if (ratelimit_take(&p->read_rl, got, &p->stop)) {
        errno = ECANCELED;
        return -1;
    }
    return 0;
}

/* Whether the stream has ended: its trailer was read (a break after it is
 * the end). */
static bool stream_ended(const struct pipeline *p)
{
    const struct stream_decoder *d = p->decoder;
    return d && !d->in_stream && d->streams > 0;
}

static ssize_t source_read(void *ctx, void *buf, size_t n)
{
    struct reader *r = ctx;
    struct pipeline *p = r->p;
    for (;;) {
        size_t ahead = take_ahead(p, buf, n);
        if (ahead > 0)
            return (ssize_t)ahead;
        if (n > READ_MAX)
            n = READ_MAX;
        n = ratelimit_chunk(&p->read_rl, n);
        confirm_if_idle(r);
        char cause[RECEIVER_CAUSE_MAX];
        enum receiver_read how;
        ssize_t got = receiver_read(&p->rx, buf, n, r->timeout_ms, stream_ended(p), cause,
                                    &how);
        if (how == RECEIVER_BROKE) {
            if (resume_input(r, cause) == 0)
                continue;
            return -1;
        }
        if (how == RECEIVER_BROKE_WHOLE) {
            r->broke_whole = true;   /* the end: the sender comes back for its answer */
            return 0;
        }
        if (got < 0) {
            r->timed_out = errno == ETIMEDOUT;
            if (p->in.stripe)
                r->stripe_errno = errno;
            else if (p->in.sealed && (errno == EBADMSG || errno == EPROTO || errno == EPIPE))
                r->sealed_errno = errno;
            return -1;
        }
        if (got > 0 && took(r, (size_t)got, n) != 0)
            return -1;
        return got;
    }
}

/* Wait until every queued block has been decoded and verified. */
static int source_settle(void *ctx)
{
    struct reader *r = ctx;
    struct pipeline *p = r->p;
    sync_lock(&p->lock);
    bool stopped = !ring_wait_settled_locked(&p->ring);
    sync_unlock(&p->lock);
    if (stopped)
        errno = ECANCELED;
    return stopped ? -1 : 0;
}

/* An encrypted stream whose record did not open (forged, flipped, dropped,
 * duplicated, reordered or replayed) or that was cut before its END record
 * is a data integrity failure, as for the stream inside it. */
static int sealed_failed(struct reader *r, struct weir_error *e)
{
    struct pipeline *p = r->p;
    return error_set(e, WEIR_EXIT_INTEGRITY, "%s: %s", p->in.name,
                     r->sealed_errno == EBADMSG
                         ? "an encrypted record does not open (corrupt, forged, dropped, "
                           "duplicated or reordered)"
                     : r->sealed_errno == EPROTO ? "data after the end of the encrypted stream"
                                                 : "the encrypted stream was cut short"),
           STEP_FAIL;
}

/* Why the input failed, if the reader knows more than errno: the sender
 * gone, the encrypted stream, a timeout.  true when e says it. */
static bool known_failure(struct reader *r, struct weir_error *e)
{
    if (r->gone.msg[0])
        *e = r->gone;
    else if (r->sealed_errno)
        sealed_failed(r, e);
    else if (r->stripe_errno && *stripe_why(&r->p->in))
        error_set(e, r->stripe_errno == EPROTO || r->stripe_errno == EBADMSG
                         ? WEIR_EXIT_INTEGRITY : r->p->in.status,
                  "%s: %s", r->p->in.name, stripe_why(&r->p->in));
    else if (r->timed_out)
        error_set(e, r->p->in.status, "%s: no progress for %g s", r->p->in.name,
                  r->p->cfg->tcp.io_timeout);
    else
        return false;
    return true;
}

/* A read failure as a step: a stop is not an error of its own. */
static int read_failed(struct reader *r, struct weir_error *e)
{
    struct pipeline *p = r->p;
    if (errno == ECANCELED || atomic_load(&p->stop))
        return STEP_STOP;
    if (known_failure(r, e))
        return STEP_FAIL;
    if (r->seek_failed)
        return error_sys(e, p->in.status, errno, "%s: lseek (looking for its holes)",
                         p->in.name), STEP_FAIL;
    return error_sys(e, p->in.status, errno, "%s: read", p->in.name), STEP_FAIL;
}

/* A decoder's failure as a step: a read that failed because the engine is
 * stopping is not reported. */
static int decode_failed(struct reader *r, struct weir_error *e)
{
    if (atomic_load(&r->p->stop))
        return STEP_STOP;
    (void)known_failure(r, e);   /* else the decoder's own message stands */
    return STEP_FAIL;
}

static void fill_publish(struct pipeline *p, size_t n)
{
    sync_lock(&p->lock);
    ring_fill_publish_locked(&p->ring, n);
    p->data_bytes += n;
    content_catch_up_locked(p);
    sync_unlock(&p->lock);
}

/* ---- holes in the input ---------------------------------------------------- */

/* A hole of len bytes goes into the buffer; seq: its -z number. */
static int add_hole(struct reader *r, uint64_t len, uint64_t seq)
{
    struct pipeline *p = r->p;
    if (!ring_add_hole(&p->ring, len, seq))
        return STEP_STOP;
    sync_lock(&p->lock);
    p->data_bytes += len;
    p->hole_bytes += len;
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* The input as it is, by its extents: >0 bytes of data read into dst (at
 * most cap), or 0 and *hole > 0 for a hole, or 0 and *hole 0 at the end;
 * -1 with errno. */
static ssize_t raw_next(struct reader *r, unsigned char *dst, size_t cap, uint64_t *hole)
{
    *hole = 0;
    r->seek_failed = false;
    if (r->staged && r->staged->pos < r->staged->end)
        return (ssize_t)stream_take_staged(r->staged, dst, cap);   /* read while sniffing */
    if (r->extents) {
        uint64_t data;
        if (sparse_extents_next(&r->ext, hole, &data)) {
            r->seek_failed = true;
            return -1;
        }
        if (*hole)
            return 0;
        if (data < cap)
            cap = (size_t)data;
    }
    ssize_t n = source_read(r, dst, cap);
    if (n > 0 && r->extents)
        sparse_extents_read(&r->ext, (size_t)n);
    return n;
}

/* Whether reading the input now would wait (a pipe with nothing in it). */
static bool input_would_wait(struct reader *r)
{
    struct pipeline *p = r->p;
    if (p->in.regular || (r->staged && r->staged->pos < r->staged->end) ||
        receiver_ahead_left(&p->rx))
        return false;
    struct pollfd pfd = {.fd = p->in.fd, .events = POLLIN};
    return poll(&pfd, 1, 0) <= 0;
}

/* --sparse: raw_next, with every grain of zeros in the data a hole too.
 * Holes that follow each other are handed on as one, unless the input
 * would make the reader wait before the next byte: then what was found
 * goes on at once, so that a consumer is never kept from zeros that came
 * before a pause. */
static ssize_t scan_next(struct reader *r, unsigned char *dst, size_t cap, uint64_t *hole)
{
    uint64_t found = 0;   /* zeros and holes found so far */
    *hole = 0;
    for (;;) {
        size_t have = r->scan_end - r->scan_pos;
        if (have > 0) {
            bool zero;
            size_t run = sparse_run(r->scan + r->scan_pos, have, r->at, r->scan_final, &zero);
            if (run > 0 && zero) {
                found += run;
                r->at += run;
                r->scan_pos += run;
                continue;
            }
            if (run > 0) {
                if (found) {
                    *hole = found;   /* the data waits for the next call */
                    return 0;
                }
                size_t take = run < cap ? run : cap;
                memcpy(dst, r->scan + r->scan_pos, take);
                r->scan_pos += take;
                r->at += take;
                return (ssize_t)take;
            }
        }
        if (r->scan_final && have == 0) {
            /* the scanned bytes are all judged: then the hole or the end */
            r->scan_final = false;
            found += r->scan_hole;
            r->at += r->scan_hole;
            r->scan_hole = 0;
            if (r->scan_eof) {
                *hole = found;   /* 0: the end */
                return 0;
            }
            continue;
        }
        if (found && input_would_wait(r)) {
            *hole = found;
            return 0;
        }
        /* read more after what waits to be judged (less than a grain) */
        memmove(r->scan, r->scan + r->scan_pos, have);
        r->scan_pos = 0;
        r->scan_end = have;
        uint64_t h;
        ssize_t n = raw_next(r, r->scan + have, SCAN_BUFFER - have, &h);
        if (n < 0)
            return -1;
        if (n > 0) {
            r->scan_end += (size_t)n;
        } else {
            r->scan_final = true;
            r->scan_hole = h;
            r->scan_eof = h == 0;
        }
    }
}

/* The next piece of the input: data, a hole or the end (raw_next). */
static ssize_t input_next(struct reader *r, unsigned char *dst, size_t cap, uint64_t *hole)
{
    if (r->p->cfg->sparse)
        return scan_next(r, dst, cap, hole);
    ssize_t n = raw_next(r, dst, cap, hole);
    if (n > 0)
        r->at += (uint64_t)n;
    r->at += *hole;
    return n;
}

/* Whether bytes wait in the reader's own buffers. */
static bool input_buffered(const struct reader *r)
{
    return r->scan_end > r->scan_pos || r->scan_final;
}

/* Holes in what is read as it is: a regular file is read by its extents;
 * --sparse scans through a buffer of its own. */
static int plan_holes(struct reader *r, struct weir_error *e)
{
    struct pipeline *p = r->p;
    if (p->in.regular && p->in.fd >= 0 && sparse_extents_init(&r->ext, p->in.fd) == 0)
        r->extents = true;
    if (p->cfg->sparse && !(r->scan = malloc(SCAN_BUFFER)))
        return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s: --sparse's buffer", p->in.name),
               STEP_FAIL;
    return STEP_OK;
}

/* ---- pass-through --------------------------------------------------------- */

static int pass_through(struct reader *r, struct stream_decoder *d, struct weir_error *e)
{
    struct pipeline *p = r->p;
    r->staged = d;
    uint64_t total = 0;
    for (;;) {
        unsigned char *dst;
        size_t cap;
        if (!ring_fill_reserve(&p->ring, 1, &dst, &cap))
            return STEP_STOP;
        uint64_t hole;
        ssize_t n = input_next(r, dst, cap, &hole);
        if (n < 0)
            return read_failed(r, e);
        if (n > 0) {
            fill_publish(p, (size_t)n);
            total += (uint64_t)n;
            continue;
        }
        if (hole == 0)
            break;
        if (add_hole(r, hole, 0) != STEP_OK)
            return STEP_STOP;
        total += hole;
    }
    /* a file cut while it was read: the copy holds neither what the file
     * held when it was opened nor what it holds now (one that grew gives
     * what it held at the end, as cat does) */
    if (p->sized && total < p->content_size)
        return error_set(e, p->in.status, "%s: the file changed while weir read it (%llu bytes "
                         "read, %llu when it was opened)", p->in.name,
                         (unsigned long long)total, (unsigned long long)p->content_size),
               STEP_FAIL;
    return STEP_OK;
}

/* ---- -z: compress ------------------------------------------------------- */

/* Fill a staging block: until full, end of input, a hole (*hole), or a
 * pause in the input; what is read is hashed at once, while it is in the
 * cache, into the LZ4 frame's content checksum when an output writes the
 * frame.  Returns bytes read, or -1 with errno; *eof at end of input. */
static ssize_t fill_staging(struct reader *r, unsigned char *buf, bool *eof, uint64_t *hole)
{
    struct pipeline *p = r->p;
    size_t got = 0, unit = p->ring.unit;
    bool short_read = false;
    *hole = 0;
    while (got < unit) {
        if (short_read && got > 0 && !receiver_ahead_left(&p->rx) && !input_buffered(r)) {
            /* the producer paused: do not hold its data back for long */
            if (p->in.ops->wait(&p->in, POLLIN, IDLE_FLUSH_MS, &p->stop) != 0) {
                if (errno == ETIMEDOUT)
                    break;
                return -1;
            }
        }
        ssize_t n = input_next(r, buf + got, unit - got, hole);
        if (n < 0)
            return -1;
        if (n == 0) {
            *eof = *hole == 0;
            break;
        }
        if (p->sums & CODEC_SUMS_FRAME)
            (void)XXH32_update(&r->content, buf + got, (size_t)n);
        short_read = (size_t)n < unit - got;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int compress_input(struct reader *r, struct weir_error *e)
{
    struct pipeline *p = r->p;
    /* every output writes its header itself (session_begin, writer_open);
     * the chain starts from the weir header's bytes */
    unsigned char hdr[CODEC_HEADER_SIZE];
    codec_header(hdr, p->piece_max,
                 CODEC_HEADER_COMPRESSED | (p->zstd ? CODEC_HEADER_ZSTD : 0), CODEC_VERSION);
    sync_lock(&p->lock);
    p->chain = codec_chain_start(hdr);
    sync_unlock(&p->lock);
    (void)XXH32_reset(&r->content, 0);
    uint64_t total = 0;
    for (bool eof = false; !eof;) {
        uint32_t idx;
        if (!ring_take_block(&p->ring, 1, &idx))
            return STEP_STOP;
        uint64_t hole;
        ssize_t n = fill_staging(r, pool_data(&p->ring.pool, idx), &eof, &hole);
        sync_lock(&p->lock);
        if (n <= 0) {
            ring_return_block_locked(&p->ring, idx);
        } else {
            struct job j = {.src = idx, .len = (size_t)n, .blk = {.seq = r->pieces}};
            r->pieces += codec_pieces((size_t)n, p->piece_max);
            p->data_bytes += (uint64_t)n;
            total += (uint64_t)n;
            job_queue_locked(p, &j);
        }
        sync_unlock(&p->lock);
        if (n < 0)
            return read_failed(r, e);
        if (hole) {
            /* a number in the weir stream, zeros in the LZ4 frame */
            if (p->sums & CODEC_SUMS_FRAME)
                for (uint64_t left = hole; left > 0;) {
                    size_t k = left < SPARSE_ZEROS_SIZE ? (size_t)left : SPARSE_ZEROS_SIZE;
                    (void)XXH32_update(&r->content, sparse_zeros(), k);
                    left -= k;
                }
            if (add_hole(r, hole, r->pieces++) != STEP_OK)
                return STEP_STOP;
            total += hole;
        }
    }
    /* the frame's header declared the size: it must be true */
    if (p->sized && total != p->content_size)
        return error_set(e, p->in.status, "%s: the file changed while weir read it (%llu bytes "
                         "read, %llu when it was opened)", p->in.name,
                         (unsigned long long)total, (unsigned long long)p->content_size),
               STEP_FAIL;
    return STEP_OK;
}

/* The end of the data (codec_end): the weir trailer needs every piece's
 * checksum, so it waits for the workers; the LZ4 frame's end carries the
 * content checksum.  It is added only once the input closed cleanly (a
 * producer exited 0). */
static int compress_end(struct reader *r)
{
    struct pipeline *p = r->p;
    uint32_t idx;
    if (!ring_take_block(&p->ring, 0, &idx))
        return STEP_STOP;
    sync_lock(&p->lock);
    if (!ring_wait_settled_locked(&p->ring)) {
        ring_return_block_locked(&p->ring, idx);
        sync_unlock(&p->lock);
        return STEP_STOP;
    }
    codec_end(pool_data(&p->ring.pool, idx), p->chain_total, r->pieces, p->chain,
              XXH32_digest(&r->content));
    ring_add_locked(&p->ring, idx, CODEC_END_SIZE);
    /* in the same breath: a writer must know the end is the last slot
     * when it takes it (ring_last_locked) */
    ring_finish_locked(&p->ring);
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* ---- decoding: the sink of decode.c ---------------------------------------- */

static int sink_start(void *ctx, size_t block, struct weir_error *e)
{
    struct reader *r = ctx;
    return pipeline_carve(r->p, block, e) ? STEP_FAIL : STEP_OK;
}

static int stored_block(struct reader *r, struct stream_decoder *d, struct stream_block *b,
                        struct weir_error *e)
{
    struct pipeline *p = r->p;
    unsigned char *dst;
    size_t cap;
    if (!ring_fill_reserve(&p->ring, b->wire_len, &dst, &cap))
        return STEP_STOP;
    if (stream_payload(d, dst, b->wire_len, e) || stream_block_end(d, b, e))
        return decode_failed(r, e);
    if (stream_verify_block(b, dst, dst, (long)b->wire_len, p->in.name, e))
        return STEP_FAIL;
    fill_publish(p, b->wire_len);
    return STEP_OK;
}

/* A block for a worker's input, after the blocks read so far are sealed;
 * false when the pipeline stops. */
static bool take_input_block(struct pipeline *p, uint32_t *idx)
{
    sync_lock(&p->lock);
    ring_seal_locked(&p->ring);
    sync_unlock(&p->lock);
    return ring_take_block(&p->ring, 1, idx);
}

/* The block filled with len bytes of b's payload goes to the workers, or,
 * when filling it failed (ok false), back to the ring. */
static void queue_or_return(struct pipeline *p, uint32_t idx, bool ok, size_t len,
                            const struct stream_block *b)
{
    sync_lock(&p->lock);
    if (ok) {
        struct job j = {.src = idx, .len = len, .blk = *b};
        job_queue_locked(p, &j);
    } else {
        ring_return_block_locked(&p->ring, idx);
    }
    sync_unlock(&p->lock);
}

static int compressed_block(struct reader *r, struct stream_decoder *d,
                            struct stream_block *b, struct weir_error *e)
{
    struct pipeline *p = r->p;
    uint32_t idx;
    if (!take_input_block(p, &idx))
        return STEP_STOP;
    bool ok = !stream_payload(d, pool_data(&p->ring.pool, idx), b->wire_len, e) &&
              !stream_block_end(d, b, e);
    queue_or_return(p, idx, ok, b->wire_len, b);
    return ok ? STEP_OK : decode_failed(r, e);
}

/* A plain zstd frame that declares its content: copied whole into a block
 * for a worker, which decodes it in one call and checks its size (and
 * libzstd its checksum, when it has one). */
static int sink_zstd_frame(void *ctx, struct stream_decoder *d, uint64_t raw,
                           struct weir_error *e)
{
    struct reader *r = ctx;
    struct pipeline *p = r->p;
    uint32_t idx;
    if (!take_input_block(p, &idx))
        return STEP_STOP;
    struct stream_block b = {.zstd = true, .plain = true, .unsummed = true,
                             .raw_len = (uint32_t)raw,
                             .seq = d->seq++, .wire_off = d->offset};
    size_t len = 0;
    bool ok = !stream_zstd_frame(d, pool_data(&p->ring.pool, idx), p->ring.unit, &len, e);
    b.wire_len = (uint32_t)len;
    queue_or_return(p, idx, ok, len, &b);
    return ok ? STEP_OK : decode_failed(r, e);
}

/* A block that may be larger than the buffer's blocks, which were sized to
 * the first stream or frame of the input: a later one may declare larger
 * blocks.  It is decoded and verified here, then published in pieces. */
static int oversize_block(struct reader *r, struct stream_decoder *d, struct stream_block *b,
                          struct weir_error *e)
{
    struct pipeline *p = r->p;
    /* the largest blocks of any input: a legacy LZ4 block */
    if (!r->big_in)
        r->big_in = malloc(CODEC_LEGACY_WIRE_MAX);
    if (!r->big_out)
        r->big_out = malloc(CODEC_LEGACY_BLOCK);
    if (!r->big_in || !r->big_out)
        return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s: a block larger than the buffer's",
                         p->in.name), STEP_FAIL;
    if (stream_payload(d, r->big_in, b->wire_len, e) || stream_block_end(d, b, e))
        return decode_failed(r, e);
    size_t cap = b->lz4 ? b->raw_max : d->block_max;
    long n = stream_decode_block(b, &r->zstd, r->big_in, r->big_out, cap);
    if (stream_verify_block(b, r->big_in, r->big_out, n, p->in.name, e))
        return STEP_FAIL;
    for (size_t off = 0; off < (size_t)n;) {
        unsigned char *dst;
        size_t room;
        if (!ring_fill_reserve(&p->ring, 1, &dst, &room))
            return STEP_STOP;
        size_t take = (size_t)n - off < room ? (size_t)n - off : room;
        memcpy(dst, r->big_out + off, take);
        fill_publish(p, take);
        off += take;
    }
    return STEP_OK;
}

static int sink_block(void *ctx, struct stream_decoder *d, struct stream_block *b,
                      struct weir_error *e)
{
    struct reader *r = ctx;
    uint64_t raw_max = b->lz4 ? b->raw_max : d->block_max;
    if (raw_max > r->p->ring.unit || b->wire_len > r->p->ring.unit)
        return oversize_block(r, d, b, e);
    return b->stored ? stored_block(r, d, b, e) : compressed_block(r, d, b, e);
}

/* A frame without a block checksum and without a content checksum can be
 * checked only for its structure and that its blocks decode, as legacy data
 * can: the user hears so once. */
static void tell_unsummed(struct reader *r, const struct stream_decoder *d)
{
    if (d->frame.block_sums || d->frame.content_sum || r->unsummed_told)
        return;
    r->unsummed_told = true;
    log_msg(r->p->log, LOG_WARN, "%s: LZ4 frame at byte %llu has no checksums; it cannot be "
            "verified", r->p->in.name, (unsigned long long)d->frame.start);
}

/* A frame to split starts: its content is checked from the next slot on. */
static int sink_frame_start(void *ctx, struct stream_decoder *d, struct weir_error *e)
{
    struct pipeline *p = ((struct reader *)ctx)->p;
    (void)e;
    tell_unsummed(ctx, d);
    sync_lock(&p->lock);
    ring_seal_locked(&p->ring);
    p->content_cur.seq = p->ring.head;
    p->content_cur.off = 0;
    p->content_cur.live = true;
    stream_content_begin(&p->content, &d->frame);
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* The frame ended: wait until all of it is decoded and hashed, then judge. */
static int sink_frame_end(void *ctx, struct stream_decoder *d, struct weir_error *e)
{
    struct pipeline *p = ((struct reader *)ctx)->p;
    struct ring *ring = &p->ring;
    sync_lock(&p->lock);
    ring_seal_locked(ring);
    for (;;) {
        if (atomic_load(&p->stop)) {
            sync_unlock(&p->lock);   /* the cursor keeps holding what it reads */
            return STEP_STOP;
        }
        content_catch_up_locked(p);
        if (!p->content_busy && p->content_cur.seq == ring->head)
            break;
        sync_wait(&ring->space_cv, &p->lock);
    }
    p->content_cur.live = false;
    ring_release_locked(ring);
    sync_unlock(&p->lock);
    return stream_content_end(&p->content, &d->frame, p->in.name, e) ? STEP_FAIL : STEP_OK;
}

/* A legacy LZ4 stream begins: its blocks decode like a frame's, but it
 * has no checksums, which the user hears once. */
static int sink_legacy(void *ctx, struct stream_decoder *d, struct weir_error *e)
{
    struct reader *r = ctx;
    (void)d, (void)e;
    if (!r->legacy_told)
        log_msg(r->p->log, LOG_WARN, "%s: legacy LZ4 data has no checksums; it cannot be "
                "verified", r->p->in.name);
    r->legacy_told = true;
    return STEP_OK;
}

/* A frame of linked blocks, decoded in order. */
static int sink_linked(void *ctx, struct stream_decoder *d, struct weir_error *e)
{
    struct reader *r = ctx;
    bool zstd = d->kind == STREAM_ZSTD;
    if (!zstd)
        tell_unsummed(r, d);
    for (;;) {
        unsigned char *dst;
        size_t cap, n;
        if (!ring_fill_reserve(&r->p->ring, 1, &dst, &cap))
            return STEP_STOP;
        int rc = zstd ? stream_zstd_read(d, dst, cap, &n, e) : stream_lz4_read(d, dst, cap, &n, e);
        if (rc)
            return decode_failed(r, e);
        if (n > 0)
            fill_publish(r->p, n);
        if (zstd ? n == 0 || !d->zstd_in_frame : !d->lz4_linked)
            return STEP_OK;
    }
}

/* A hole record of the stream. */
static int sink_hole(void *ctx, uint64_t len, struct weir_error *e)
{
    (void)e;
    return add_hole(ctx, len, 0);
}

/* Look at the input and run the matching loop. */
static int read_input(struct reader *r, struct weir_error *e)
{
    struct pipeline *p = r->p;
    const struct weir_config *c = p->cfg;
    if ((p->encode || !p->may_decode || p->rx.plain) && plan_holes(r, e) != STEP_OK)
        return STEP_FAIL;
    if (p->encode)
        return compress_input(r, e);
    if (!p->may_decode)
        return pass_through(r, NULL, e);
    if (p->rx.plain)   /* admitted as plain bytes: taken as they are, never decoded */
        return pipeline_carve(p, (size_t)c->block, e) ? STEP_FAIL : pass_through(r, NULL, e);
    struct stream_decoder d;
    struct stream_source src = {.read = source_read, .settle = source_settle, .ctx = r,
                                .error_status = p->in.status, .name = p->in.name,
                                .sealed = p->in.sealed != NULL || p->in.sealed_below,
                                .window_max = c->mem,   /* -m bounds a zstd window */
                                /* the trailer ends it: a sender that will say
                                 * it read the answer keeps its direction open */
                                .one_stream = p->cfg->channel_trusted || p->rx.answer_word};
    if (stream_init(&d, &src, e))
        return STEP_FAIL;
    p->decoder = &d;
    int rc = STEP_OK;
    if (stream_sniff(&d, c->decode, !c->decode, e))
        rc = decode_failed(r, e);
    if (rc == STEP_OK && d.kind != STREAM_RAW) {
        sync_lock(&p->lock);
        p->decoding = true;
        p->decoding_zstd = d.kind == STREAM_ZSTD || d.zstd;
        /* a weir sender over TCP gets keepalives and an answer from main */
        p->answer_sender = d.kind == STREAM_WEIR && p->in.is_socket;
        sync_unlock(&p->lock);
        struct decode_sink sink = {.ctx = r, .start = sink_start, .block = sink_block,
                                   .frame_start = sink_frame_start,
                                   .frame_end = sink_frame_end, .linked = sink_linked,
                                   .zstd_frame = sink_zstd_frame,
                                   .legacy = sink_legacy, .hole = sink_hole};
        rc = decode_stream(&d, &sink, e);
        if (rc == STEP_FAIL)
            rc = decode_failed(r, e);
        if (rc == STEP_OK && d.kind == STREAM_WEIR) {
            sync_lock(&p->lock);
            p->stream_chain = d.chain;   /* the answer vouches for this stream */
            p->stream_whole = true;
            sync_unlock(&p->lock);
        }
    } else if (rc == STEP_OK) {
        if (p->in.is_socket)
            log_msg(p->log, LOG_INFO, "%s: plain bytes, not a weir stream: its end cannot be "
                    "verified", p->in.name);
        rc = pipeline_carve(p, (size_t)c->block, e) || plan_holes(r, e) ? STEP_FAIL
                                                                          : pass_through(r, &d, e);
    }
    p->decoder = NULL;
    stream_free(&d);
    return rc;
}

/* Whether the reader watches the sender's connection for the outputs'
 * end (thread_done then wakes it). */
static void set_watching(struct pipeline *p, bool on)
{
    sync_lock(&p->lock);
    p->reader_watching = on;
    sync_unlock(&p->lock);
}

/* Whether every output has finished (its thread ended). */
static bool outputs_done(struct pipeline *p)
{
    sync_lock(&p->lock);
    bool done = true;
    for (int i = 0; i < p->nout; i++)
        done &= !p->out[i].running;
    sync_unlock(&p->lock);
    return done;
}

/* A sender that will say it read the answer keeps its connection open
 * after the trailer and sends nothing until the answer.  While the outputs
 * finish (a consumer committing), the reader watches that connection, so
 * that a break then (a reset, an end) takes the sender back at once, as a
 * break in the stream would, not when the answer finds it gone (a sender
 * whose --reconnect is shorter than the drain would be gone by then). */
static void watch_after_trailer(struct reader *r)
{
    struct pipeline *p = r->p;
    set_watching(p, true);
    while (!atomic_load(&p->stop) && !outputs_done(p)) {
        struct pollfd pf = {.fd = p->in.fd, .events = POLLIN};
        int n = poll(&pf, 1, 100);   /* an output that ends wakes it (thread_done) */
        if (n < 0 && errno != EINTR)
            break;
        if (n <= 0)
            continue;
        char c;
        ssize_t k = recv(p->in.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (k > 0)
            break;   /* bytes (a trailer sent again): the answer's drain reads them */
        if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            r->broke_whole = true;   /* the sender comes back for its answer */
            break;
        }
    }
    set_watching(p, false);
}

/* The input ended or failed: close it (a producer is waited for, so its
 * exit status counts before the stream is declared complete), unless a
 * weir sender still needs its answer from the main thread. */
static int close_input(struct pipeline *p, int rc, struct weir_error *e)
{
    sync_lock(&p->lock);
    bool keep = p->answer_sender;
    sync_unlock(&p->lock);
    if (keep)
        return rc;
    struct weir_error why;
    bool ok = rc == STEP_OK && !atomic_load(&p->stop);
    if (transport_close(&p->in, ok, &p->stop, &why) != 0 && rc == STEP_OK) {
        if (atomic_load(&p->stop))
            return STEP_STOP;
        *e = why;
        return STEP_FAIL;
    }
    return rc;
}

void *reader_main(void *arg)
{
    struct pipeline *p = arg;
    struct weir_error e;
    thread_unblock_wake();
    struct reader r = {.p = p};
    register_receiver(p);
    int rc = p->cfg->input == WEIR_IN_LISTEN ? admit_sender(p, &e) : STEP_OK;
    if (rc == STEP_OK) {
        sync_lock(&p->lock);
        ring_start_locked(&p->ring);
        sync_unlock(&p->lock);
        r.timeout_ms = io_timeout_ms(p, &p->in);
        rc = read_input(&r, &e);
    }
    free(r.big_in);
    free(r.big_out);
    codec_zstd_free(NULL, &r.zstd);
    free(r.scan);
    sync_lock(&p->lock);
    bool whole = rc == STEP_OK && p->stream_whole;
    sync_unlock(&p->lock);
    /* whole: its sender may still have to come back for the answer */
    bool home = receiver_stream_over(&p->rx, whole);
    rc = close_input(p, rc, &e);
    if (rc == STEP_OK && p->encode)
        rc = compress_end(&r);
    if (rc == STEP_FAIL)
        pipeline_fail(p, &e);
    sync_lock(&p->lock);
    ring_finish_locked(&p->ring);
    p->jobs_done = true;
    sync_broadcast(&p->job_cv);
    sync_unlock(&p->lock);
    if (home && p->rx.answer_word && rc == STEP_OK && !r.broke_whole)
        watch_after_trailer(&r);
    if (home && r.broke_whole && rc == STEP_OK)
        receiver_hold_for_answer(&p->rx, &p->stop);
    thread_done(p, &p->reader_running);
    return NULL;
}
