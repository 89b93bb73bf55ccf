/*
 * worker.c - the transform workers: LZ4 compression for -z, and decoding
 * and verifying the compressed blocks of a weir stream or of a plain LZ4
 * frame.  See the essay at the top of pipeline.c.
 *
 * Jobs wait in a FIFO (p->jobs) guarded by p->lock.  A worker takes the
 * oldest, takes the output block the job was promised, and does the work
 * with the lock released.  Results land in the job's slot, which may be
 * ahead of slots still being worked on; cursors stop at the ring's ready
 * slot, so order is kept without the workers waiting for each other.
 */
#include "pipeline_int.h"
#include "weir/codec.h"
#include "weir/sync.h"

void job_queue_locked(struct pipeline *p, struct job *j)
{
    j->seq = ring_add_locked(&p->ring, RING_PENDING, 0);
    p->jobs[p->job_tail % p->ring.pool.nblocks] = *j;
    p->job_tail++;
    p->ring.reserved++;
    p->ring.staging_bytes += j->len;
    sync_signal(&p->job_cv);
}

/* Take the next job and its output block; false when there is no more work. */
static bool worker_take(struct pipeline *p, struct job *j, uint32_t *out)
{
    sync_lock(&p->lock);
    while (!atomic_load(&p->stop) && p->job_head == p->job_tail && !p->jobs_done)
        sync_wait(&p->job_cv, &p->lock);
    bool ok = !atomic_load(&p->stop) && p->job_head != p->job_tail;
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
    }
    sync_unlock(&p->lock);
    return ok;
}

static void worker_finish(struct pipeline *p, const struct job *j, uint32_t out, size_t len,
                          uint64_t raw, uint64_t hash)
{
    sync_lock(&p->lock);
    ring_return_block_locked(&p->ring, j->src);
    p->ring.staging_bytes -= j->len;
    if (!p->encode)
        p->data_bytes += raw;
    ring_present_locked(&p->ring, j->seq, out, len, hash, (uint32_t)raw);
    content_catch_up_locked(p);
    sync_unlock(&p->lock);
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct pipeline *p = w->p;
    thread_unblock_wake();
    struct job j;
    uint32_t out;
    while (worker_take(p, &j, &out)) {
        const unsigned char *src = pool_data(&p->ring.pool, j.src);
        unsigned char *dst = pool_data(&p->ring.pool, out);
        if (p->encode) {
            uint64_t hash;
            size_t n = codec_encode_block(src, j.len, dst, p->cfg->level, j.blk.seq,
                                          (uint32_t)p->ring.unit, &hash);
            worker_finish(p, &j, out, n, j.len, hash);
            continue;
        }
        size_t cap = p->ring.pool.block_size;
        if (j.blk.lz4 && j.blk.raw_max < cap)
            cap = j.blk.raw_max;
        long n = codec_decode_block(src, j.len, j.blk.stored, dst, cap);
        struct weir_error e;
        if (stream_verify_block(&j.blk, src, dst, n, p->in.name, &e)) {
            pipeline_fail(p, &e);
            break;
        }
        worker_finish(p, &j, out, (size_t)n, (uint64_t)n, 0);
    }
    thread_done(p, &w->running);
    return NULL;
}
