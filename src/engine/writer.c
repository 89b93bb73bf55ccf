/*
 * writer.c - one writer thread per output, and the back channel of an
 * output that sends a weir stream to another weir.  See the essay at the
 * top of pipeline.c.
 *
 * A writer opens its transport (connecting for -O, after which the
 * receiver must greet it before it writes a byte), begins the stream
 * (session.c: greeting and header), then copies published bytes from its
 * cursor to the transport.  A TCP output that is not --raw frames raw data
 * as a weir stream of stored blocks, each write one verified block sent
 * with writev(), so the data is not copied.  With -z the buffer holds the
 * compressed pieces and the end of the data (codec.h), which serve two
 * forms: a connection to another weir writes the weir stream's spans of
 * each, anything else one LZ4 frame (its header first, then the data blocks
 * with their checksums, then the EndMark and the content checksum), from
 * the same bytes, compressed once.  At the end a weir sender
 * half-closes the connection and waits for the receiver's answer, which the
 * back-channel thread reads along with its keepalives; only a success
 * answer makes the output complete.  That thread also hears an early
 * failure while data is still flowing, and then stops this output at once.
 * A file is flushed to stable storage before it counts as complete; a
 * consumer command counts once it has exited 0.
 *
 * Holes in the data (a slot of the buffer each) leave as the output can
 * take them (enum output_holes): a regular file skips them with lseek and
 * sets its size at the end, so that a trailing hole is kept; a weir
 * receiver that takes holes gets one record each; an LZ4 frame (-z to a
 * file or pipe), which has no holes, gets blocks of compressed zeros;
 * anything else is written the zeros.
 *
 * Every step returns a weir_step (error.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "base/io.h"
#include "base/sync.h"
#include "crypto/secret.h"
#include "format/codec.h"
#include "format/sparse.h"

#include "engine/writer_int.h"


/* -z: write at most limit bytes of this output's form of the piece at the
 * cursor (src), from where the writer is in it.  Returns the bytes
 * written, or -1 with errno; *step is how far the cursor moves, the
 * other form's bytes included. */
static ssize_t write_piece(struct output *o, const unsigned char *src, size_t limit, int tmo,
                           size_t *step)
{
    const unsigned char *piece = src - o->piece_at;
    struct codec_span sp[2];
    size_t total;
    int k = codec_spans(piece, o->form, sp, &total);
    struct iovec iov[2];
    int cnt = 0;
    for (int i = 0; i < k && limit > 0; i++) {
        size_t end = sp[i].off + sp[i].len;
        if (end <= o->piece_at)
            continue;
        size_t from = sp[i].off > o->piece_at ? sp[i].off : o->piece_at;
        size_t len = end - from < limit ? end - from : limit;
        iov[cnt++] = (struct iovec){(void *)(piece + from), len};
        limit -= len;
    }
    ssize_t w = session_writev(&o->session, iov, cnt, tmo, &o->halt);
    if (w < 0)
        return -1;
    /* where the writer is now: the bytes between spans are stepped over */
    size_t at = o->piece_at, left = (size_t)w;
    for (int i = 0; i < k; i++) {
        size_t end = sp[i].off + sp[i].len;
        if (end <= at)
            continue;
        if (at < sp[i].off)
            at = sp[i].off;
        size_t take = end - at < left ? end - at : left;
        at += take;
        left -= take;
        if (at < end)
            break;
        at = i + 1 < k ? sp[i + 1].off : total;
    }
    *step = at - o->piece_at;
    o->piece_at = at == total ? 0 : at;
    return w;
}


/* ---- holes ---------------------------------------------------------------- */

#define ZERO_BLOCKS_AT_ONCE 64   /* HOLES_FRAME: whole blocks of zeros per write */

static int hole_write_failed(struct output *o, struct weir_error *e)
{
    if (errno == EPIPE && o->has_child)
        return consumer_quit(o, e);
    return write_error(o, e, "write");
}

/* One frame of len zeros for this output's kind of hole into dst (cap
 * bytes): an LZ4 block (HOLES_FRAME) or a 'z' record and a zstd frame
 * (HOLES_ZSTD).  0 when it does not fit. */
static size_t zeros_frame(struct output *o, unsigned char *dst, size_t cap, size_t len)
{
    if (o->holes == HOLES_ZSTD)
        return codec_zstd_zeros(dst, cap, o->zc, sparse_zeros(), len);
    return codec_zero_block(dst, cap, sparse_zeros(), len);
}

/* HOLES_FRAME and HOLES_ZSTD: frames of zeros a piece's worth each, the
 * whole ones from one buffer made once; with zstd the hole's record goes
 * first, once.  *done is the raw bytes they hold. */
static int write_zero_frames(struct output *o, size_t n, int tmo, size_t *done,
                             struct weir_error *e)
{
    struct pipeline *p = o->p;
    bool zstd = o->holes == HOLES_ZSTD;
    if (zstd && !o->hole_said) {
        if (session_hole(&o->session, o->cur.hole_seq, n, tmo, &o->halt))
            return hole_write_failed(o, e);
        o->hole_said = true;
    }
    size_t full = p->piece_max, cap = zstd ? CODEC_ZSTD_ZEROS_MAX : full / 255 + 72;
    if (!o->zero_frame) {
        o->zero_frame = malloc(2 * cap);
        if (!o->zero_frame || (zstd && !codec_zstd_cctx(&o->zc)))
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
        o->zero_frame_len = zeros_frame(o, o->zero_frame, cap, full);
    }
    struct iovec iov[ZERO_BLOCKS_AT_ONCE];
    int cnt = 0;
    size_t raw = 0, bytes = 0;
    if (n >= full) {
        for (; cnt < ZERO_BLOCKS_AT_ONCE && raw + full <= n; cnt++, raw += full)
            iov[cnt] = (struct iovec){o->zero_frame, o->zero_frame_len};
        bytes = (size_t)cnt * o->zero_frame_len;
    } else {
        unsigned char *tail = o->zero_frame + cap;
        bytes = zeros_frame(o, tail, cap, n);
        iov[cnt++] = (struct iovec){tail, bytes};
        raw = n;
    }
    if (o->zero_frame_len == 0 || bytes == 0)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: zeros did not compress", o->t.name),
               STEP_FAIL;
    if (transport_writev_all(&o->t, iov, cnt, tmo, &o->halt))
        return hole_write_failed(o, e);
    *done = raw;
    o->hole_said = zstd && raw < n;
    return ratelimit_take(&o->rl, bytes, &o->halt) ? STEP_STOP : STEP_OK;
}

/* A hole at the cursor, n bytes of it left: skip it, send its record, or
 * write (some of) its zeros.  *done: how much of it is behind. */
static int write_hole(struct output *o, size_t n, int tmo, size_t *done, struct weir_error *e)
{
    *done = 0;
    switch (o->holes) {
    case HOLES_SKIP:
        if (transport_skip(&o->t, n, e))
            return STEP_FAIL;
        o->skipped = true;
        *done = n;
        return STEP_OK;
    case HOLES_RECORD:
        if (mark(o, MARK_RECORD, 0) ||
            session_hole(&o->session, o->cur.hole_seq, n, tmo, &o->halt))
            return write_error(o, e, "write");
        *done = n;
        return STEP_OK;
    case HOLES_REFUSED:
        return refuse_hole(o, e);
    case HOLES_FRAME:
    case HOLES_ZSTD:
        return write_zero_frames(o, n, tmo, done, e);
    case HOLES_ZEROS:
        break;
    }
    size_t chunk = ratelimit_chunk(&o->rl, n < SPARSE_ZEROS_SIZE ? n : SPARSE_ZEROS_SIZE);
    ssize_t w;
    if (o->session.frame) {
        if (chunk > o->session.block_max)
            chunk = o->session.block_max;
        if (o->exact > 0) {
            /* cut as the first time (see writer_loop) */
            if (n < o->exact || o->exact > SPARSE_ZEROS_SIZE)
                return error_set(e, WEIR_EXIT_INTERNAL, "%s: the zeros to send again are "
                                 "not the %llu bytes first sent", o->t.name,
                                 (unsigned long long)o->exact), STEP_FAIL;
            chunk = (size_t)o->exact;
            o->exact = 0;
        }
        if (mark(o, MARK_RECORD, chunk))
            return write_error(o, e, "write");
        w = session_frame(&o->session, sparse_zeros(), chunk, tmo, &o->halt);
    } else {
        struct iovec iov = {(void *)sparse_zeros(), chunk};
        w = o->t.ops->writev(&o->t, &iov, 1, tmo, &o->halt);
    }
    if (w < 0)
        return hole_write_failed(o, e);
    *done = (size_t)w;
    return ratelimit_take(&o->rl, (size_t)w, &o->halt) ? STEP_STOP : STEP_OK;
}

/* ---- the data --------------------------------------------------------------- */

/* A hole of n bytes at the cursor, passed as this output passes holes. */
static int pass_hole(struct output *o, size_t n, int tmo, struct weir_error *e)
{
    struct pipeline *p = o->p;
    size_t done;
    int rc = write_hole(o, n, tmo, &done, e);
    if (rc != STEP_OK)
        return rc;
    sync_lock(&p->lock);
    ring_advance_locked(&p->ring, &o->cur, done);
    if (o->holes == HOLES_RECORD || o->session.frame)
        boundary_locked(o);
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* How much of the n bytes at the cursor the next write takes: a resent
 * stored block is cut as it was the first time, by whichever rule cut it
 * then (-R's bursts, or a sealed stream's whole blocks), since the
 * receiver holds its start; else -R's share and a frame's largest block.
 * STEP_FAIL with *e when the block to send again is shorter than it was. */
static int next_cut(struct output *o, size_t *n, struct weir_error *e)
{
    if (o->exact > 0 && o->session.frame) {
        if (*n < o->exact)
            return error_set(e, WEIR_EXIT_INTERNAL, "%s: the block to send again holds %zu "
                             "bytes of the %llu it was sent with", o->t.name, *n,
                             (unsigned long long)o->exact), STEP_FAIL;
        *n = (size_t)o->exact;
        o->exact = 0;
        return STEP_OK;
    }
    *n = ratelimit_chunk(&o->rl, *n);
    if (o->session.frame && *n > o->session.block_max)
        *n = o->session.block_max;
    return STEP_OK;
}

/* -z to a weir: the last bytes carry the trailer; a success answer may
 * come as soon as they are out, so a sealed stream's last record says so */
static void note_last(struct output *o, size_t n)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    if (ring_last_locked(&p->ring, &o->cur, n))
        o->bc.ended = true;
    bool last = o->bc.ended;
    sync_unlock(&p->lock);
    if (last && o->t.sealed && !says_read(o))
        transport_sealed_last(&o->t);
}

/* Write n bytes at src in this output's form; *step: how far the cursor
 * moves.  What the write returned (the bytes it took), or -1. */
static ssize_t write_form(struct output *o, const unsigned char *src, size_t n, int tmo,
                          size_t *step)
{
    ssize_t w;
    if (o->p->encode)
        return write_piece(o, src, n, tmo, step);
    if (o->session.frame) {
        w = session_frame(&o->session, src, n, tmo, &o->halt);
    } else {
        struct iovec iov = {(void *)src, n};
        w = o->t.ops->writev(&o->t, &iov, 1, tmo, &o->halt);
    }
    *step = (size_t)w;
    return w;
}

/* Send the next n bytes of data at src: noted for resuming, written,
 * paced.  STEP_OK, STEP_AGAIN (the workers take over), or a failure. */
static int send_data(struct output *o, const unsigned char *src, size_t n, int tmo,
                     struct weir_error *e)
{
    struct pipeline *p = o->p;
    if ((o->session.frame || (p->encode && o->piece_at == 0 && o->session.greet)) &&
        mark(o, MARK_RECORD, o->session.frame ? n : 0))
        return write_error(o, e, "write");
    if (o->session.compressed && o->session.greet)
        note_last(o, n);
    size_t step;
    ssize_t w = write_form(o, src, n, tmo, &step);
    if (w < 0)
        return errno == EPIPE && o->has_child ? consumer_quit(o, e)
                                              : write_error(o, e, "write");
    sync_lock(&p->lock);
    ring_advance_locked(&p->ring, &o->cur, step);
    if (o->session.greet)
        boundary_locked(o);
    sync_unlock(&p->lock);
    if (ratelimit_take(&o->rl, (size_t)w, &o->halt))
        return STEP_STOP;
    /* a resumed connection's first record is out: the workers take over */
    if (o->t.sealed && p->nworkers > 0 && o->session.skip == 0 && o->piece_at == 0)
        return STEP_AGAIN;
    return STEP_OK;
}

static int writer_loop(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int tmo = io_timeout_ms(p, &o->t);
    for (;;) {
        const unsigned char *src;
        size_t n;
        int rc;
        if (sample_path(o))
            grow_tick(o);   /* fed with the fresh sample */
        if (o->replaying) {
            if ((rc = reread_record(o, tmo, e)) != STEP_OK)
                return rc;
            continue;
        }
        int r = ring_next(&p->ring, &o->cur, &src, &n);
        if (r == RING_END)
            return STEP_OK;
        if (r == RING_STOP)
            return STEP_STOP;
        if (r == RING_BROKEN)
            return broke_while_idle(o, e);
        if (r == RING_HOLE)
            rc = pass_hole(o, n, tmo, e);
        else if ((rc = next_cut(o, &n, e)) == STEP_OK)
            rc = send_data(o, src, n, tmo, e);
        if (rc != STEP_OK)
            return rc;
    }
}

/* Finish a complete output: trailer and answer, or the end of a plain
 * connection, or a flush to stable storage. */
static int writer_end(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    grow_end(o);   /* the connections still joining carry the end too */
    if (o->session.frame) {
        sync_lock(&p->lock);
        o->bc.ended = true;   /* a success answer may come once the trailer is out */
        sync_unlock(&p->lock);
        if (o->t.sealed && !says_read(o))
            transport_sealed_last(&o->t);
        if (mark(o, MARK_TRAILER, 0) ||
            session_trailer(&o->session, io_timeout_ms(p, &o->t), &o->halt))
            return write_error(o, e, "write");
        sync_lock(&p->lock);
        boundary_locked(o);   /* the end: a confirmation of it frees everything */
        sync_unlock(&p->lock);
    }
    if (o->session.greet)
        return await_answer(o, e);
    if (o->t.is_socket) {
        if (o->t.ops->half_close(&o->t, e) == 0)
            return raw_confirm(o, e);
        if (errno == ENOTCONN || errno == ECONNRESET)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer reset the connection: the data "
                             "may not all have arrived", o->t.name), STEP_FAIL;
        return STEP_FAIL;
    }
    /* the size first: a trailing hole is part of the file */
    if (o->skipped && transport_end_holes(&o->t, p->cfg->dsync, e))
        return STEP_FAIL;
    /* success is only reported for data a crash cannot take back */
    if (!p->cfg->no_sync && (o->t.regular || o->t.blockdev)) {
        sync_lock(&p->lock);
        o->state = STATS_OUT_FLUSHING;
        sync_unlock(&p->lock);
        if (transport_sync(&o->t, e))
            return STEP_FAIL;
    }
    return STEP_OK;
}

/* An unfinished stream must not look like a clean end to the far side: a
 * weir receiver is told why in an abort record (after the frame in flight
 * is finished, so that it can read it), any other connection is reset, a
 * consumer gets SIGTERM before its input closes (transport_close without
 * success).  True when a weir receiver was told. */
static bool writer_abort(struct output *o)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    struct weir_error why = p->first;
    bool failed = p->failed;
    const unsigned char *rest = NULL;
    size_t restlen = 0;
    /* -z: the rest of the piece being written, which the cursor still holds */
    if (o->session.compressed && o->piece_at > 0 && !o->dead &&
        ring_peek_locked(&p->ring, &o->cur, &rest, &restlen) == RING_DATA) {
        struct codec_span sp[2];
        size_t total;
        codec_spans(rest - o->piece_at, CODEC_FORM_WEIR, sp, &total);
        restlen = sp[0].off + sp[0].len - o->piece_at;
    } else {
        restlen = 0;
    }
    sync_unlock(&p->lock);
    bool told = session_abort(&o->session, failed ? why.status : WEIR_EXIT_NETWORK,
                              failed ? why.msg : "sender stopped", rest, restlen);
    if (!told && o->spec->kind == WEIR_OUT_TCP)
        log_msg(p->log, LOG_DEBUG, "%s: the receiver could not be told why (%s); resetting "
                "the connection", o->name, o->session.spoke ? strerror(errno) : "nothing sent");
    if (!told) {
        o->t.ops->abort(&o->t);
    }
    return told;
}

/* Close: for a consumer this waits for it to exit, and its exit status
 * decides whether the output is complete.  told: a weir receiver was sent
 * an abort record; it gets a moment to read it before the connection goes
 * (closing with its records unread would reset the connection). */
static int writer_close(struct output *o, int rc, bool told, struct weir_error *e)
{
    struct pipeline *p = o->p;
    backchannel_finish(&o->bc, told);
    sync_lock(&p->lock);
    o->awaiting = rc == STEP_OK && o->has_child;
    sync_unlock(&p->lock);
    struct weir_error why;
    int closed = transport_close(&o->t, rc == STEP_OK || told, &o->halt, &why);
    sync_lock(&p->lock);
    o->awaiting = false;
    sync_unlock(&p->lock);
    if (closed != 0 && rc == STEP_OK) {
        if (atomic_load(&o->halt) && !o->has_child)
            return STEP_STOP;
        *e = why;
        return STEP_FAIL;
    }
    return rc;
}

/* The stream failed before this connection's header went (a producer
 * that failed within milliseconds, before the connection was made or the
 * receiver's greeting read): the receiver has seen nothing it trusts and
 * would go on listening for a sender.  Connect once more, one attempt, and
 * tell it why: greeting, handshake, header, then the abort record
 * (writer_abort).  Only a signal skips this (it sets halt again, as does
 * any later stop); the opening's own limits bound it.  A connection the
 * engine was handed (--connect-back) cannot be made again. */
static int tell_early(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    const struct weir_config *c = p->cfg;
    if (o->spec->kind != WEIR_OUT_TCP || c->tcp.raw || o->spec->connected ||
        o->session.spoke || o->bc.joinable || o->plain_fallback)
        return STEP_STOP;
    sync_lock(&p->lock);
    /* a signal may come after the producer's death was the first error */
    bool tell = p->failed && p->first.status < WEIR_EXIT_SIGNAL && !p->signalled && !o->dead;
    if (tell)
        atomic_store(&o->halt, false);
    sync_unlock(&p->lock);
    if (!tell)
        return STEP_STOP;
    if (o->t.fd >= 0)
        let_go(o);   /* reset: the receiver drops it as unproven */
    log_msg(p->log, LOG_INFO, "%s: the stream failed before it began: connecting once more "
            "to tell the receiver", o->name);
    int rc = writer_open(o, true, e);
    atomic_store(&o->halt, true);   /* the stream is over: what follows is the abort */
    if (rc == STEP_FAIL)
        log_msg(p->log, LOG_INFO, "%s (the receiver could not be told)", e->msg);
    return rc == STEP_OK ? STEP_STOP : rc;
}

void *writer_main(void *arg)
{
    struct output *o = arg;
    struct pipeline *p = o->p;
    struct weir_error e;
    thread_unblock_wake();
    int rc = writer_open(o, false, &e);
    if (rc == STEP_STOP)
        rc = tell_early(o, &e);
    for (bool done = false; rc == STEP_OK && !done;) {
        do
            rc = o->t.sealed && p->nworkers > 0 && o->session.skip == 0 ? sealed_loop(o, &e)
                                                                       : writer_loop(o, &e);
        while (rc == STEP_AGAIN);
        if (rc == STEP_OK) {
            rc = writer_end(o, &e);
            done = rc == STEP_OK;
        }
        /* a session that may resume outlives its connection */
        if (rc != STEP_OK && connection_broke(o))
            rc = reconnect(o, &e);
    }
    /* the first error is this writer's, not what the back channel hears
     * when the connection is shut down below */
    if (rc == STEP_FAIL)
        output_fail(o, &e);
    /* a receiver that answered (a failure of its own) is closed on in
     * order: a reset would take back the acknowledgement of its answer,
     * which is how it knows the answer arrived (reader.c, answer_delivered) */
    grow_end(o);
    sync_lock(&p->lock);
    bool answered = o->bc.answered;
    sync_unlock(&p->lock);
    bool told = rc != STEP_OK && (answered || writer_abort(o));
    int closed = writer_close(o, rc, told, &e);
    if (closed == STEP_FAIL && rc == STEP_OK)
        output_fail(o, &e);
    sync_lock(&p->lock);
    o->state = closed == STEP_OK ? STATS_OUT_DONE : STATS_OUT_STOPPED;
    sync_unlock(&p->lock);
    free(o->zero_frame);
    codec_zstd_free(&o->zc, NULL);
    o->zero_frame = NULL;
    if (p->tls_client && o->spec->kind == WEIR_OUT_TCP) {
        sync_lock(&p->lock);
        p->sealing_writers--;   /* the workers may go once the reader is done too */
        sync_broadcast(&p->job_cv);
        sync_unlock(&p->lock);
    }
    thread_done(p, &o->running);
    return NULL;
}
