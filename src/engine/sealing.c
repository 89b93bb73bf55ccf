/*
 * sealing.c - an encrypted output: records sealed ahead by the workers,
 * written in order.  See writer_int.h.
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

/* ---- an encrypted output: records sealed ahead by the workers -------------- */

/* a job's records: a framed block is sealed as three (see seal_one) */
#define SEALED_JOB_MAX (SEAL_MAX_PLAIN + 3 * SEAL_OVERHEAD)

/* Queue what the buffer holds beyond the records already queued, up to
 * SEAL_AHEAD records.  Lock held. */
/* A hole of n bytes as one record: numbered in order here when framed,
 * by the reader for -z (lock held). */
static void hole_job_locked(struct output *o, struct seal_job *j, size_t n)
{
    struct pipeline *p = o->p;
    uint64_t num = o->session.frame ? o->next_frame_seq++
                                    : ring_hole_seq_locked(&p->ring, o->q_seq);
    codec_hole(j->rec, num, n);
    j->hole = true;
    j->hole_len = n;
    j->src = j->rec;
    j->len = CODEC_HOLE_SIZE;
    j->step = n;
    j->num = transport_sealed_numbers(&o->t, 1);
    j->frame_seq = 0;
}

/* n bytes of data at src as one record (a framed block's three, or -z's
 * piece), the direction's last when it carries the trailer (lock held). */
static void data_job_locked(struct output *o, struct seal_job *j, const unsigned char *src,
                            size_t n)
{
    struct pipeline *p = o->p;
    if (o->session.frame && n > o->session.block_max)
        n = o->session.block_max;
    j->len = j->step = n;
    j->src = src;
    if (o->session.compressed) {
        /* -z: a record is the weir form of one piece (or of the end) */
        struct codec_span sp[2];
        codec_spans(src, CODEC_FORM_WEIR, sp, &j->step);
        j->len = sp[0].len;
    }
    if (!o->session.frame && ring_range_last_locked(&p->ring, o->q_seq, o->q_off, j->step)) {
        /* -z: the trailer's record ends the direction (or the 'D' will) */
        j->flags = says_read(o) ? 0 : SEAL_END;
        o->bc.ended = true;       /* and a success answer may come once it is out */
    }
    j->num = transport_sealed_numbers(&o->t, o->session.frame ? 3 : 1);
    j->frame_seq = o->session.frame ? o->next_frame_seq++ : 0;
}

static void queue_seals_locked(struct output *o)
{
    struct pipeline *p = o->p;
    while (o->ahead_count < SEAL_AHEAD && !o->hole_refused) {
        const unsigned char *src;
        size_t n;
        int got = ring_range_locked(&p->ring, &o->q_seq, &o->q_off, &src, &n);
        if (got == RING_END)
            return;
        if (got == RING_HOLE && o->holes == HOLES_REFUSED) {
            o->hole_refused = true;   /* its writer says so */
            return;
        }
        struct seal_job *j = &o->ahead[(o->ahead_head + o->ahead_count) % SEAL_AHEAD];
        j->hole = false;
        j->seq = o->q_seq;
        j->off = o->q_off;
        j->flags = 0;
        if (got == RING_HOLE && o->holes == HOLES_RECORD) {
            hole_job_locked(o, j, n);
        } else {
            if (got == RING_HOLE) {
                /* framed, to a weir that takes no holes: stored blocks of zeros */
                src = sparse_zeros();
                if (n > SPARSE_ZEROS_SIZE)
                    n = SPARSE_ZEROS_SIZE;
            }
            data_job_locked(o, j, src, n);
        }
        j->out_len = 0;
        j->done = false;
        o->ahead_count++;
        o->q_off += j->step;
        seal_queue_locked(p, j);
    }
}

/* Write the oldest sealed record; fold a framed block into the trailer's
 * chain in order. */
static int write_sealed(struct output *o, struct seal_job *j, int tmo, struct weir_error *e)
{
    if (j->out_len == 0)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: a record could not be sealed",
                         o->t.name), STEP_FAIL;
    bool data = o->session.frame && !j->hole;   /* three records (queue_seals_locked) */
    if (mark(o, MARK_RECORD, data ? j->len : 0))
        return write_error(o, e, "write");
    struct iovec iov = {j->out, j->out_len}, *v = &iov;
    int left = 1;
    size_t sent = 0;
    while (left > 0) {
        ssize_t w = io_writev(o->t.fd, v, left, tmo, &o->halt);
        transport_count(o->t.wire_tx, w);
        if (w < 0) {
            if (sent > 0)
                transport_sealed_broken(&o->t);   /* no abort after half a record */
            return write_error(o, e, "write");
        }
        sent += (size_t)w;
        io_iov_advance(&v, &left, (size_t)w);
    }
    transport_sealed_sent(&o->t, j->num + (data ? 3 : 1));
    o->session.sent += data ? CODEC_FRAME_PREFIX + j->len + CODEC_FRAME_SUFFIX : j->len;
    if (o->session.frame && j->hole) {
        o->session.seq++;
        o->session.total += j->hole_len;
        o->session.chain = codec_chain_hole(o->session.chain,
                                            codec_get64(j->rec + CODEC_HOLE_SIZE - 8),
                                            j->hole_len);
    } else if (o->session.frame) {
        o->session.seq++;
        o->session.total += j->len;
        o->session.chain = codec_chain(o->session.chain, j->hash, (uint32_t)j->len);
    }
    return STEP_OK;
}

/* The writer of an encrypted output, with workers: it keeps up to
 * SEAL_AHEAD records queued for them, and sends them in order as they come
 * back, so the sealing runs on -T threads while this one only writes. */
int sealed_loop(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int tmo = io_timeout_ms(p, &o->t);
    /* the buffers outlive this thread (a worker may still be sealing into
     * one when it stops): weir_destroy frees them */
    for (int i = 0; i < SEAL_AHEAD; i++) {
        o->ahead[i].o = o;
        if (!o->ahead[i].out)
            o->ahead[i].out = malloc(SEALED_JOB_MAX);
        if (!o->ahead[i].out)
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
    }
    if (!o->tx_dir && !(o->tx_dir = secret_alloc(sizeof *o->tx_dir)))
        return error_sys(e, WEIR_EXIT_INTERNAL, errno, "%s", o->t.name), STEP_FAIL;
    sync_lock(&p->lock);
    transport_sealed_tx(&o->t, o->tx_dir, &o->epoch_records);
    o->q_seq = o->cur.seq;
    o->q_off = o->cur.off;
    o->next_frame_seq = o->session.seq;   /* a resumed connection's records go on from here */
    o->ahead_head = o->ahead_count = 0;
    for (;;) {
        if (atomic_load(&o->halt)) {
            sync_unlock(&p->lock);
            return STEP_STOP;
        }
        queue_seals_locked(o);
        struct seal_job *j = &o->ahead[o->ahead_head];
        if (o->hole_refused && o->ahead_count == 0) {
            sync_unlock(&p->lock);
            return refuse_hole(o, e);
        }
        if (o->ahead_count > 0 && j->done) {
            sync_unlock(&p->lock);
            int rc = write_sealed(o, j, tmo, e);
            if (rc != STEP_OK)
                return rc;
            sync_lock(&p->lock);
            ring_advance_locked(&p->ring, &o->cur, j->step);
            boundary_locked(o);
            o->ahead_head = (o->ahead_head + 1) % SEAL_AHEAD;
            o->ahead_count--;
            sync_unlock(&p->lock);
            if (ratelimit_take(&o->rl, j->len, &o->halt))
                return STEP_STOP;
            sample_path(o);
            sync_lock(&p->lock);
            continue;
        }
        if (o->ahead_count == 0 && ring_ended_at_locked(&p->ring, o->q_seq)) {
            sync_unlock(&p->lock);
            return STEP_OK;
        }
        if (o->bc.broken) {
            sync_unlock(&p->lock);
            return broke_while_idle(o, e);
        }
        ring_wait_locked(&p->ring, &o->cur);
    }
}
