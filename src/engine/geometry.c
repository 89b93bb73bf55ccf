/*
 * geometry.c - the buffer's geometry: how many blocks of what size the
 * reservation is carved into (at creation, or once a decoding engine learns
 * the stream's block size), the readahead a file input may ask for, the
 * content size a split LZ4 frame declares, and which outputs may re-read
 * the input instead of holding what is unconfirmed.  pipeline.c plans with
 * these at creation; the reader carves with pipeline_carve().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sync.h"
#include "engine/pipeline_int.h"
#include "os/os.h"

/* ---- the buffer's geometry ----------------------------------------------- */

/* The fewest blocks the pipeline runs with: a transform's staging and
 * output blocks for every worker, and a few for the reader and writers. */
static uint64_t transform_blocks(const struct pipeline *p)
{
    return p->nworkers > 0 ? 2 * (uint64_t)p->nworkers + 4 : 2;
}

/* A regular file needs no buffer to cover for it: it can be read at any
 * time and the kernel reads ahead on its own.  Reading far ahead only takes
 * memory from the page cache and costs CPU touching fresh pages and caches
 * (measured: 2 GiB over loopback took 25% longer with the sender 512 MiB
 * ahead than 64 MiB ahead, and 12% longer 64 MiB ahead than 16 MiB), so
 * such an input is held to --readahead, unless -P or -p ask for the buffer
 * to fill.  Blocks held for a resume count in it, but workers always have
 * a transform's worth of blocks ahead of them to work on. */
void plan_readahead_locked(struct pipeline *p)
{
    const struct weir_config *c = p->cfg;
    p->ring.read_window = 0;
    p->ring.read_lead = p->nworkers > 0 ? (uint32_t)transform_blocks(p) : 0;
    if (!p->in.regular || c->start_write_pct > 0 || c->resume_read_pct < 100)
        return;
    uint64_t bs = p->ring.pool.block_size;
    uint64_t window = c->readahead / bs + (c->readahead % bs != 0);
    if (window < transform_blocks(p))
        window = transform_blocks(p);
    if (window < p->ring.pool.nblocks)
        p->ring.read_window = (uint32_t)window;
}

/* Cut the reserved buffer into blocks of `block` bytes (as many as -m
 * holds, at least what a transform needs), with the job queue. */
static int carve_locked(struct pipeline *p, size_t block, size_t unit, struct weir_error *err)
{
    uint64_t nblocks = p->cfg->mem / pool_stride(block);
    if (nblocks > RING_MAX_BLOCKS && p->may_decode) {
        /* tiny blocks declared by the far side (-z -s 16 there): fewer,
         * larger ones here; -s given here is taken as it is */
        block = unit = (size_t)(p->cfg->mem / RING_MAX_BLOCKS);
        nblocks = p->cfg->mem / pool_stride(block);
    }
    if (nblocks * pool_stride(block) > p->ring.pool.reserved)
        nblocks = p->ring.pool.reserved / pool_stride(block);
    if (nblocks < transform_blocks(p))
        nblocks = transform_blocks(p);   /* documented: a transform needs a few */
    if (ring_carve_locked(&p->ring, block, unit, nblocks, err))
        return -1;
    p->jobs = calloc(nblocks, sizeof *p->jobs);
    if (!p->jobs)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "buffer: job queue");
    plan_readahead_locked(p);
    return 0;
}

int pipeline_carve(struct pipeline *p, size_t block, struct weir_error *err)
{
    sync_lock(&p->lock);
    int rc = p->ring.carved ? 0 : carve_locked(p, block, block, err);
    sync_unlock(&p->lock);
    return rc;
}

/* -z folds the checksum of each piece into the trailer's chain as its slot
 * becomes ready, in order (lock held). */
static void fold_chain(void *ctx, const struct ring_slot *s)
{
    struct pipeline *p = ctx;
    if (s->hole) {
        unsigned char rec[CODEC_HOLE_SIZE];
        codec_hole(rec, s->hole_seq, s->hole);
        p->chain = codec_chain_hole(p->chain, codec_get64(rec + CODEC_HOLE_SIZE - 8), s->hole);
        p->chain_total += s->hole;
        return;
    }
    if (!s->raw_len)
        return;   /* the end */
    const unsigned char *data = pool_data(&p->ring.pool, s->block);
    for (size_t off = 0; off < s->len;) {
        uint32_t raw;
        uint64_t hash;
        off += codec_piece_record(data + off, &raw, &hash);
        p->chain = codec_chain(p->chain, hash, raw);
        p->chain_total += raw;
    }
}

/* Block geometry.  -z: blocks hold a raw block of -s bytes, compressed in
 * pieces of at most 4 MiB (the largest LZ4 block), each with its overhead
 * (codec.h); --zstd: the same pieces as zstd frames, which may be a little
 * larger than their data.  Pass-through: -s.  When weir may decode (-d, or -I without
 * --raw), the blocks are sized later to what the stream declares
 * (pipeline_carve), so that a stream of 64 KiB blocks fills -m with data
 * rather than with 64 KiB in every 4 MiB block; the address space is
 * reserved now, for the largest blocks an input may declare (a legacy LZ4
 * block), so a failure is reported before anything connects or starts. */
int plan_buffer(struct pipeline *p, struct weir_error *err)
{
    const struct weir_config *c = p->cfg;
    /* the workers transform blocks, and seal the records of encrypted
     * outputs ahead of their writers */
    if (p->encode || p->may_decode || p->tls_client)
        p->nworkers = c->threads;
    p->workers = calloc((size_t)p->nworkers + 1, sizeof *p->workers);
    if (!p->workers)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "buffer: worker table");
    size_t unit = (size_t)c->block;
    p->wire_block_max = c->block < CODEC_BLOCK_MAX ? (uint32_t)c->block : CODEC_BLOCK_MAX;
    p->piece_max = p->wire_block_max;
    if (p->encode) {
        p->ring.on_ready = fold_chain;
        p->ring.on_ready_ctx = p;
    }
    if (p->may_decode) {
        p->wire_block_max = CODEC_BLOCK_MAX;
        uint64_t least = transform_blocks(p) * pool_stride(CODEC_LEGACY_WIRE_MAX);
        return ring_reserve(&p->ring, c->mem > least ? c->mem : least, err);
    }
    size_t block = unit;
    if (p->zstd)
        block = codec_zstd_room(unit, p->piece_max);
    else if (p->encode)
        block += codec_pieces(unit, p->piece_max) * CODEC_PIECE_OVERHEAD;
    uint64_t nblocks = c->mem / pool_stride(block);
    if (nblocks < transform_blocks(p))
        nblocks = transform_blocks(p);
    if (ring_reserve(&p->ring, nblocks * pool_stride(block), err))
        return -1;
    return carve_locked(p, block, unit, err);
}

/* A regular file's size is known in advance: with -z it goes in the header
 * of the LZ4 frame that files get.  Files whose size the file system does
 * not report (those of /proc and /sys show no blocks) are left unsized.
 * The reader compares the size with what it read, so a file that changes
 * while it is read is an error rather than a frame that lies (-z) or a copy
 * that is short of what the file held (a file cut while it was read). */
int plan_content_size(struct pipeline *p, struct weir_error *err)
{
    if (!p->in.regular)
        return 0;
    struct stat st;
    if (fstat(p->in.fd, &st) != 0)
        return error_sys(err, p->in.status, errno, "%s: fstat", p->in.name);
    off_t at = lseek(p->in.fd, 0, SEEK_CUR);
    if (at < 0)
        return error_sys(err, p->in.status, errno, "%s: lseek", p->in.name);
    p->sized = st.st_size > 0 && st.st_blocks > 0 && at <= st.st_size;
    p->content_size = p->sized ? (uint64_t)(st.st_size - at) : 0;
    return 0;
}

/* A connection that may resume must be able to send again what the
 * receiver lacks.  Holding it in the buffer costs a transfer that never
 * breaks about 7% at memory speed (the reader then refills blocks sent a
 * confirmation ago, gone from the cache, rather than the one just sent).
 * A regular file can instead be read again: the reader's bytes are the
 * file's from where it began, its holes included.  That needs a file
 * description of its own (the reader seeks the input's for holes), and a
 * buffer that holds the file's bytes as they are: not -z's blocks, not
 * decoded ones.  Without it (a pipe, a descriptor the system cannot open
 * anew) the hold stays. */
void plan_reread(struct pipeline *p)
{
    const struct weir_config *c = p->cfg;
    bool network = false;
    for (int i = 0; i < c->noutputs; i++)
        network |= c->outputs[i].kind == WEIR_OUT_TCP;
    if (!network || !p->in.regular || p->encode || p->may_decode || !(c->reconnect > 0))
        return;
    off_t at = lseek(p->in.fd, 0, SEEK_CUR);
    int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY;
    int fd = at < 0 ? -1 : os_reopen(p->in.fd, flags);
    if (fd < 0 && at >= 0 && c->input == WEIR_IN_FILE && c->input_path)
        fd = open(c->input_path, flags);   /* the same file, checked below */
    if (fd < 0)
        return;
    struct stat a, b;
    if (fstat(fd, &a) != 0 || fstat(p->in.fd, &b) != 0 || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) {
        close(fd);
        return;
    }
    p->reread_fd = fd;
    p->reread_base = (uint64_t)at;
}
