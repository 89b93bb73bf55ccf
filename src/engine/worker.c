/*
 * worker.c - the transform workers: LZ4 compression for -z (each block
 * once, into pieces that serve a weir stream and an LZ4 file alike:
 * codec.h), decoding and verifying the compressed blocks of a weir stream
 * or of plain LZ4 data, and sealing records ahead of encrypted outputs.
 * See the essay at the top of pipeline.c.
 *
 * Jobs wait in a FIFO (p->jobs) guarded by p->lock.  A worker takes the
 * oldest, takes the output block the job was promised, and does the work
 * with the lock released.  Results land in the job's slot, which may be
 * ahead of slots still being worked on; cursors stop at the ring's ready
 * slot, so order is kept without the workers waiting for each other.
 */
#include "base/sync.h"
#include "engine/pipeline_int.h"
#include "format/codec.h"
#include <sys/uio.h>

void job_queue_locked(struct pipeline *p, struct job *j)
{
    j->seq = ring_add_locked(&p->ring, RING_PENDING, 0);
    p->jobs[p->job_tail % p->ring.pool.nblocks] = *j;
    p->job_tail++;
    p->ring.reserved++;
    p->ring.staging_bytes += j->len;
    sync_signal(&p->job_cv);
}

void seal_queue_locked(struct pipeline *p, struct seal_job *j)
{
    p->sealq[p->seal_tail % ((uint64_t)p->nout * SEAL_AHEAD)] = j;
    p->seal_tail++;
    sync_signal(&p->job_cv);
}

/* Seal one record ahead of its writer: a -z block as it is in the buffer,
 * or raw data framed as a stored block (its checksum computed here, and
 * folded into the trailer's chain by the writer, in order). */
static void seal_one(struct worker *w, struct seal_job *j)
{
    struct output *o = j->o;
    int i = (int)(o - w->p->out);
    struct weir_error e;
    if (w->seal_ready[i] && w->seal_gen[i] != o->tx_gen) {
        /* the output reconnected: its new connection has keys of its own
         * (the job was queued, under the lock, after they changed) */
        sealer_free(&w->seal[i]);
        w->seal_ready[i] = false;
    }
    if (!w->seal_ready[i]) {
        w->seal_gen[i] = o->tx_gen;
        if (sealer_init(&w->seal[i], o->tx_dir, o->epoch_records, &e)) {
            j->out_len = 0;
            return;
        }
        w->seal_ready[i] = true;
    }
    if (!o->session.frame || j->hole) {
        /* a -z piece as it is, or a hole record */
        j->out_len = seal_record(&w->seal[i], j->num, j->flags, j->src, j->len, j->out);
        return;
    }
    /* A framed block goes out as three records: the frame's prefix, the
     * block, its suffix.  The receiver's decoder reads a frame's prefix and
     * suffix into its stage and the block straight into its buffer, so a
     * record that is exactly the block is opened there, without a copy. */
    unsigned char prefix[CODEC_FRAME_PREFIX], suffix[CODEC_FRAME_SUFFIX];
    j->hash = o->session.unsummed ? 0 : codec_block_hash(j->src, j->len, j->frame_seq);
    codec_frame_prefix(prefix, o->session.block_max, (uint32_t)j->len, true);
    codec_frame_suffix(suffix, j->frame_seq, (uint32_t)j->len, j->hash);
    struct sealer *s = &w->seal[i];
    size_t a = seal_record(s, j->num, 0, prefix, sizeof prefix, j->out);
    size_t b = a ? seal_record(s, j->num + 1, 0, j->src, j->len, j->out + a) : 0;
    size_t c = b ? seal_record(s, j->num + 2, j->flags, suffix, sizeof suffix,
                               j->out + a + b) : 0;
    j->out_len = c ? a + b + c : 0;
}

/* Take the next thing to do: a record to seal (the writers wait on those),
 * or a transform job and its output block.  1: a job; 2: a seal; 0: no
 * more work. */
static int worker_take(struct pipeline *p, struct job *j, uint32_t *out, struct seal_job **sj)
{
    sync_lock(&p->lock);
    for (;;) {
        if (atomic_load(&p->stop)) {
            sync_unlock(&p->lock);
            return 0;
        }
        if (p->seal_head != p->seal_tail) {
            *sj = p->sealq[p->seal_head % ((uint64_t)p->nout * SEAL_AHEAD)];
            p->seal_head++;
            sync_unlock(&p->lock);
            return 2;
        }
        if (p->job_head != p->job_tail)
            break;
        if (p->jobs_done && p->sealing_writers == 0) {
            sync_unlock(&p->lock);
            return 0;
        }
        sync_wait(&p->job_cv, &p->lock);
    }
    bool ok = true;
    if (ok) {
        *j = p->jobs[p->job_head % p->ring.pool.nblocks];
        p->job_head++;
        p->ring.reserved--;
        /* the reader kept this block free for us (ring_take_block) */
        ok = pool_take_locked(&p->ring.pool, out);
        if (!ok) {
            struct weir_error e;
            error_set(&e, WEIR_EXIT_INTERNAL, "internal error: no block for a worker");
            sync_unlock(&p->lock);
            pipeline_fail(p, &e);
            return false;
        }
        p->transforming++;
    }
    sync_unlock(&p->lock);
    return ok ? 1 : 0;
}

static void worker_finish(struct pipeline *p, const struct job *j, uint32_t out, size_t len,
                          uint64_t raw)
{
    sync_lock(&p->lock);
    p->transforming--;
    ring_return_block_locked(&p->ring, j->src);
    p->ring.staging_bytes -= j->len;
    if (!p->encode)
        p->data_bytes += raw;
    ring_present_locked(&p->ring, j->seq, out, len, p->encode ? raw : 0);
    content_catch_up_locked(p);
    sync_unlock(&p->lock);
}

/* --adapt: whether this block is stored.  A block that compressed to
 * within ADAPT_POOR of its size stores the next ones unread by zstd, twice
 * as many each time (at most ADAPT_STORE_MAX), then tries again. */
#define ADAPT_POOR 0.98
#define ADAPT_STORE_MAX 64

static bool store_next(struct worker *w)
{
    if (w->store_left == 0)
        return false;
    w->store_left--;
    return true;
}

static void judge_ratio(struct worker *w, size_t raw, size_t wire)
{
    if ((double)wire < (double)raw * ADAPT_POOR) {
        w->store_run = 0;
        return;
    }
    w->store_run = w->store_run ? w->store_run * 2 : 2;
    if (w->store_run > ADAPT_STORE_MAX)
        w->store_run = ADAPT_STORE_MAX;
    w->store_left = w->store_run;
}

/* --zstd: the block's pieces as zstd frames (stored ones when --adapt says
 * so, or the block's worker found the last ones incompressible); 0 when
 * zstd failed. */
static size_t encode_zstd(struct worker *w, const struct job *j, const unsigned char *src,
                          unsigned char *dst)
{
    struct pipeline *p = w->p;
    int level = p->adapt.on ? adapt_level(&p->adapt) : p->cfg->level;
    double t0 = clock_now();
    if (p->adapt.on && (level == ADAPT_STORED || store_next(w))) {
        size_t n = codec_store_zstd(src, j->len, dst, j->blk.seq, p->piece_max, p->sums);
        adapt_used(&p->adapt, ADAPT_STORED, j->len, n, clock_now() - t0);
        return n;
    }
    void *cc = codec_zstd_cctx(&w->zc);
    size_t n = cc ? codec_encode_zstd(src, j->len, dst, cc, level, j->blk.seq, p->piece_max,
                                      p->sums) : 0;
    if (n && p->adapt.on) {
        adapt_used(&p->adapt, level, j->len, n, clock_now() - t0);
        judge_ratio(w, j->len, n);
    }
    return n;
}

/* -z or --zstd: one block of raw data into its pieces.  Nonzero when the
 * engine fails (zstd could not work: out of memory). */
static int encode_job(struct worker *w, const struct job *j, const unsigned char *src,
                      unsigned char *dst, uint32_t out)
{
    struct pipeline *p = w->p;
    double t0 = clock_now();
    size_t n = p->zstd ? encode_zstd(w, j, src, dst)
                       : codec_encode(src, j->len, dst, p->cfg->level, j->blk.seq,
                                      p->piece_max, p->sums);
    if (n == 0) {
        struct weir_error e;
        error_set(&e, WEIR_EXIT_INTERNAL, "zstd could not compress block %llu (out of "
                  "memory?)", (unsigned long long)j->blk.seq);
        sync_lock(&p->lock);
        p->transforming--;
        sync_unlock(&p->lock);
        pipeline_fail(p, &e);
        return -1;
    }
    sync_lock(&p->lock);
    p->encode_secs += clock_now() - t0;
    sync_unlock(&p->lock);
    worker_finish(p, j, out, n, j->len);
    return 0;
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct pipeline *p = w->p;
    thread_unblock_wake();
    struct job j;
    uint32_t out;
    struct seal_job *sj;
    for (int what; (what = worker_take(p, &j, &out, &sj)) != 0;) {
        if (what == 2) {
            seal_one(w, sj);
            sync_lock(&p->lock);
            sj->done = true;
            sync_broadcast(&p->ring.data_cv);   /* its writer waits there */
            sync_unlock(&p->lock);
            continue;
        }
        const unsigned char *src = pool_data(&p->ring.pool, j.src);
        unsigned char *dst = pool_data(&p->ring.pool, out);
        if (p->encode) {
            if (encode_job(w, &j, src, dst, out))
                break;
            continue;
        }
        size_t cap = p->ring.pool.block_size;
        if (j.blk.lz4 && j.blk.raw_max < cap)
            cap = j.blk.raw_max;
        long n = stream_decode_block(&j.blk, &w->zd, src, dst, cap);
        struct weir_error e;
        if (stream_verify_block(&j.blk, src, dst, n, p->in.name, &e)) {
            sync_lock(&p->lock);
            p->transforming--;
            sync_unlock(&p->lock);
            pipeline_fail(p, &e);
            break;
        }
        worker_finish(p, &j, out, (size_t)n, (uint64_t)n);
    }
    for (int i = 0; i < WEIR_MAX_OUTPUTS; i++)
        if (w->seal_ready[i])
            sealer_free(&w->seal[i]);
    codec_zstd_free(&w->zc, &w->zd);
    thread_done(p, &w->running);
    return NULL;
}
