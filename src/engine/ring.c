/* ring.c - see ring.h, and the essay at the top of pipeline.c. */
#include "engine/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/sync.h"

void ring_init(struct ring *r, pthread_mutex_t *lock, atomic_bool *stop, int start_pct,
               int resume_pct)
{
    memset(r, 0, sizeof *r);
    r->lock = lock;
    r->stop = stop;
    sync_cond_init(&r->data_cv);
    sync_cond_init(&r->space_cv);
    r->start_pct = start_pct;
    r->resume_pct = resume_pct;
    r->gate_open = start_pct == 0;
    r->empty_since = -1;
}

void ring_destroy(struct ring *r)
{
    pool_destroy(&r->pool);
    free(r->slot);
    r->slot = NULL;
}

int ring_reserve(struct ring *r, size_t bytes, struct weir_error *err)
{
    return pool_reserve(&r->pool, bytes, err);
}

int ring_carve_locked(struct ring *r, size_t block, size_t unit, uint64_t nblocks,
                      struct weir_error *err)
{
    if (pool_carve(&r->pool, block, (uint32_t)nblocks, err))
        return -1;
    /* a slot for every block, one for every hole beside them (ring_add_hole
     * keeps to that), and one spare */
    uint64_t size = 1;
    while (size < 2 * nblocks + 1)
        size <<= 1;
    r->slot = calloc(size, sizeof *r->slot);
    if (!r->slot)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "buffer: slot table");
    r->mask = size - 1;
    r->unit = unit;
    r->carved = true;
    return 0;
}

void ring_add_cursor(struct ring *r, struct ring_cursor *c, atomic_bool *halt, bool counts)
{
    memset(c, 0, sizeof *c);
    c->halt = halt;
    c->counts = counts;
    c->live = counts;   /* an output holds blocks from the start */
    r->cursor[r->ncursors++] = c;
    if (counts)
        r->live_outputs++;
}

void ring_stop_locked(struct ring *r)
{
    atomic_store(r->stop, true);
    for (int i = 0; i < r->ncursors; i++)
        if (r->cursor[i]->halt)
            atomic_store(r->cursor[i]->halt, true);
    sync_broadcast(&r->data_cv);
    sync_broadcast(&r->space_cv);
}

static struct ring_slot *slot_at(const struct ring *r, uint64_t seq)
{
    return &r->slot[seq & r->mask];
}

/* ---- releasing ----------------------------------------------------------- */

void ring_release_locked(struct ring *r)
{
    uint64_t min_seq = r->ready, min_read = r->ready, min_bytes = r->queued_bytes;
    for (int i = 0; i < r->ncursors; i++) {
        const struct ring_cursor *c = r->cursor[i];
        if (!c->live)
            continue;
        if (c->seq < min_seq)
            min_seq = c->seq;
        if (!c->holder && c->seq < min_read)
            min_read = c->seq;
        if ((c->counts || c->holder) && c->bytes < min_bytes)
            min_bytes = c->bytes;
    }
    r->min_out = min_bytes;
    /* blocks only a holder keeps do not count against the read window:
     * an output moving on past one makes room for the reader as surely as
     * freeing it would */
    bool widened = min_read - min_seq > r->held_back;
    r->held_back = min_read - min_seq;
    bool freed = false;
    while (r->tail < min_seq) {
        const struct ring_slot *s = slot_at(r, r->tail);
        if (s->hole)
            r->hole_slots--;
        else
            pool_release_locked(&r->pool, s->block);
        r->tail++;
        freed = true;
    }
    /* a throttled reader (-p) watches the fill, which every read lowers */
    if (freed || widened || r->throttled)
        sync_broadcast(&r->space_cv);
}

static void advance_ready_locked(struct ring *r)
{
    uint64_t before = r->ready;
    while (r->ready < r->head && slot_at(r, r->ready)->present) {
        if (r->on_ready)
            r->on_ready(r->on_ready_ctx, slot_at(r, r->ready));
        r->ready++;
    }
    if (r->ready != before) {
        sync_broadcast(&r->data_cv);
        sync_broadcast(&r->space_cv);   /* a reader may wait for the workers to settle */
    }
}

/* ---- the fill ------------------------------------------------------------ */

uint64_t ring_fill_locked(const struct ring *r)
{
    return r->queued_bytes - r->min_out + r->staging_bytes;
}

uint64_t ring_capacity_locked(const struct ring *r)
{
    uint64_t blocks = r->read_window ? r->read_window : r->pool.nblocks;
    return blocks * r->pool.block_size;
}

void ring_gate_check_locked(struct ring *r)
{
    if (!r->gate_open &&
        ring_fill_locked(r) * 100 >= ring_capacity_locked(r) * (uint64_t)r->start_pct) {
        r->gate_open = true;
        sync_broadcast(&r->data_cv);
    }
}

/* ---- the reader ---------------------------------------------------------- */

/* The buffer is as full as it gets: -P's gate opens (a cursor never waits
 * for a fill the reader cannot reach), and the reader waits for room. */
static void wait_full_locked(struct ring *r)
{
    if (!r->gate_open) {
        r->gate_open = true;
        sync_broadcast(&r->data_cv);
    }
    double t0 = clock_now();
    sync_wait(&r->space_cv, r->lock);
    r->t_full += clock_now() - t0;
}

bool ring_take_block(struct ring *r, uint32_t extra, uint32_t *idx)
{
    sync_lock(r->lock);
    while (!atomic_load(r->stop)) {
        uint64_t used = r->pool.nblocks - r->pool.nfree;
        uint64_t fill = ring_fill_locked(r);
        /* -p 0: only once the outputs have read everything */
        if (r->throttled &&
            (fill * 100 < ring_capacity_locked(r) * (uint64_t)r->resume_pct || fill == 0))
            r->throttled = false;
        uint64_t promised = used + r->reserved + extra;
        /* the window bounds the blocks in use, held ones included, since
         * every block the ring cycles through is memory to touch (being
         * able to resume cost a tenth on loopback when held blocks came on
         * top of the window); but the reader always stays a quarter of the
         * window ahead of the slowest output, and at least two blocks,
         * however much a connection that may resume holds (a long link, a
         * slow receiver; with a window of two blocks or less, a reader
         * kept level with the hold waited for each confirmation, and a
         * transfer took five times as long), or more when workers
         * compress (read_lead: with two blocks ahead of a long link's hold,
         * the outputs waited on workers that had time to spare) */
        uint64_t lead = r->read_window / 4 < 2 ? 2 : r->read_window / 4;
        if (lead < r->read_lead)
            lead = r->read_lead;
        uint64_t least = r->held_back + lead;
        bool within = r->read_window == 0 ||
                      promised < (r->read_window > least ? r->read_window : least);
        if (!r->throttled && within && r->pool.nfree > r->reserved + extra) {
            pool_take_locked(&r->pool, idx);
            sync_unlock(r->lock);
            return true;
        }
        /* the buffer is full: the outputs set the pace.  It is as full as
         * it can get even when some blocks stay free for the workers or
         * hold less than a block of data, so -P's gate opens here in any
         * case: a cursor never waits for a fill the reader cannot reach */
        if (r->resume_pct < 100)
            r->throttled = true;
        wait_full_locked(r);
    }
    sync_unlock(r->lock);
    return false;
}

void ring_return_block_locked(struct ring *r, uint32_t idx)
{
    pool_release_locked(&r->pool, idx);
    sync_broadcast(&r->space_cv);
}

void ring_seal_locked(struct ring *r)
{
    if (r->filling) {
        slot_at(r, r->head - 1)->sealed = true;
        r->filling = false;
        sync_broadcast(&r->data_cv);
    }
}

uint64_t ring_add_locked(struct ring *r, uint32_t block, size_t len)
{
    uint64_t seq = r->head++;
    bool present = block != RING_PENDING;
    *slot_at(r, seq) = (struct ring_slot){.block = present ? block : 0, .present = present,
                                          .sealed = present, .len = len};
    if (present) {
        r->queued_bytes += len;
        advance_ready_locked(r);
    }
    return seq;
}

void ring_present_locked(struct ring *r, uint64_t seq, uint32_t block, size_t len,
                         uint64_t raw_len)
{
    *slot_at(r, seq) = (struct ring_slot){.block = block, .present = true, .sealed = true,
                                          .len = len, .raw_len = raw_len};
    r->queued_bytes += len;
    ring_gate_check_locked(r);
    advance_ready_locked(r);
}

bool ring_fill_reserve(struct ring *r, size_t want, unsigned char **dst, size_t *cap)
{
    for (;;) {
        sync_lock(r->lock);
        if (r->filling) {
            struct ring_slot *s = slot_at(r, r->head - 1);
            if (r->unit - s->len >= want) {
                *dst = pool_data(&r->pool, s->block) + s->len;
                *cap = r->unit - s->len;
                sync_unlock(r->lock);
                return true;
            }
            ring_seal_locked(r);
        }
        sync_unlock(r->lock);
        uint32_t idx;
        if (!ring_take_block(r, 0, &idx))
            return false;
        sync_lock(r->lock);
        uint64_t seq = r->head++;
        *slot_at(r, seq) = (struct ring_slot){.block = idx, .present = true};
        r->filling = true;
        advance_ready_locked(r);
        sync_unlock(r->lock);
    }
}

void ring_fill_publish_locked(struct ring *r, size_t n)
{
    struct ring_slot *s = slot_at(r, r->head - 1);
    s->len += n;
    r->queued_bytes += n;
    if (s->len == r->unit)
        ring_seal_locked(r);
    ring_gate_check_locked(r);
    sync_broadcast(&r->data_cv);
}

bool ring_add_hole(struct ring *r, uint64_t len, uint64_t seq)
{
    sync_lock(r->lock);
    while (r->hole_slots >= r->pool.nblocks && !atomic_load(r->stop))
        wait_full_locked(r);   /* as full as it gets, as in ring_take_block */
    if (atomic_load(r->stop)) {
        sync_unlock(r->lock);
        return false;
    }
    struct ring_slot hole = {.block = RING_NO_BLOCK, .present = true, .sealed = true,
                             .hole = len, .hole_seq = seq};
    struct ring_slot *last = r->head > r->tail ? slot_at(r, r->head - 1) : NULL;
    if (r->filling && last->len == 0 && !r->on_ready) {
        /* nothing was published in the filling slot: it becomes the hole
         * (a cursor there has read nothing of it) */
        pool_release_locked(&r->pool, last->block);
        r->filling = false;
        *last = hole;
        sync_broadcast(&r->data_cv);
    } else {
        ring_seal_locked(r);
        *slot_at(r, r->head++) = hole;
        advance_ready_locked(r);
    }
    r->hole_slots++;
    sync_unlock(r->lock);
    return true;
}

uint64_t ring_hole_seq_locked(const struct ring *r, uint64_t seq)
{
    return slot_at(r, seq)->hole_seq;
}

bool ring_wait_settled_locked(struct ring *r)
{
    while (r->ready != r->head && !atomic_load(r->stop))
        sync_wait(&r->space_cv, r->lock);   /* advance_ready_locked broadcasts */
    return !atomic_load(r->stop);
}

void ring_finish_locked(struct ring *r)
{
    ring_seal_locked(r);
    r->input_done = true;
    r->gate_open = true;
    if (r->t_start > 0)
        r->t_input_end = clock_now();
    sync_broadcast(&r->data_cv);
    sync_broadcast(&r->space_cv);
}

/* ---- the cursors --------------------------------------------------------- */

/* Whether the buffer has just run empty: every live output waits for data
 * while the input is open; the input sets the pace from now on. */
static bool note_empty_locked(struct ring *r)
{
    int waiting = 0;
    for (int i = 0; i < r->ncursors; i++) {
        const struct ring_cursor *o = r->cursor[i];
        waiting += o->counts && o->live && o->waiting;
    }
    if (waiting != r->live_outputs || r->t_start <= 0 || r->input_done || r->empty_since >= 0)
        return false;
    r->empty_since = clock_now();
    r->empty_on_workers = r->ready < r->head;   /* waiting for a worker */
    return true;
}

void ring_start_locked(struct ring *r)
{
    r->t_start = clock_now();
    if (r->live_outputs > 0)
        (void)note_empty_locked(r);
}

static void wait_for_data_locked(struct ring *r, struct ring_cursor *c)
{
    c->waiting = true;
    if (note_empty_locked(r) && r->start_pct > 0 && r->ready == r->head && r->tail == r->head)
        r->gate_open = false;   /* -P: fill to the mark again before writing */
    sync_wait(&r->data_cv, r->lock);
    c->waiting = false;
    if (r->empty_since >= 0) {
        double waited = clock_now() - r->empty_since;
        if (r->empty_on_workers)
            r->t_workers += waited;
        else
            r->t_empty += waited;
        r->empty_since = -1;
    }
}

int ring_peek_locked(struct ring *r, struct ring_cursor *c, const unsigned char **src,
                     size_t *n)
{
    while (c->seq < r->ready) {
        struct ring_slot *s = slot_at(r, c->seq);
        if (s->hole > c->off) {
            *src = NULL;
            *n = (size_t)(s->hole - c->off);
            c->hole_seq = s->hole_seq;
            return RING_HOLE;
        }
        if (s->len > c->off) {
            *src = pool_data(&r->pool, s->block) + c->off;
            *n = s->len - c->off;
            return RING_DATA;
        }
        if (!s->sealed)
            break;
        c->seq++;
        c->off = 0;
        ring_release_locked(r);
    }
    return RING_END;
}

int ring_next(struct ring *r, struct ring_cursor *c, const unsigned char **src, size_t *n)
{
    sync_lock(r->lock);
    int rc = RING_STOP;
    while (!atomic_load(c->halt)) {
        int got = r->gate_open ? ring_peek_locked(r, c, src, n) : RING_END;
        if (got != RING_END) {
            rc = got;
            break;
        }
        if (!r->gate_open && c->seq < r->ready) {
            /* the gate is closed: still step over slots already read */
            const unsigned char *s;
            size_t k;
            (void)ring_peek_locked(r, c, &s, &k);
        }
        if (r->input_done && c->seq == r->head) {
            rc = RING_END;
            break;
        }
        if (c->broken && *c->broken) {
            rc = RING_BROKEN;
            break;
        }
        wait_for_data_locked(r, c);
    }
    sync_unlock(r->lock);
    return rc;
}

/* What a slot holds for a cursor: its hole, or its published bytes. */
static uint64_t slot_extent(const struct ring_slot *s)
{
    return s->hole ? s->hole : s->len;
}

void ring_advance_locked(struct ring *r, struct ring_cursor *c, size_t n)
{
    struct ring_slot *s = slot_at(r, c->seq);
    /* a slot read to its end before it was sealed (a hole, or a worker's
     * block, came after it) is behind a cursor that moves on: one that
     * seals ahead (ring_range_locked) has stepped over it already */
    while (c->seq < r->ready && s->sealed && c->off == slot_extent(s) && n > 0) {
        c->seq++;
        c->off = 0;
        s = slot_at(r, c->seq);
    }
    c->off += n;
    if (s->hole)
        c->holes += n;
    else
        c->bytes += n;
    if (s->sealed && c->off == slot_extent(s)) {
        c->seq++;
        c->off = 0;
    }
    ring_release_locked(r);
}

int ring_range_locked(struct ring *r, uint64_t *seq, size_t *off, const unsigned char **src,
                      size_t *n)
{
    if (!r->gate_open)
        return RING_END;
    while (*seq < r->ready) {
        struct ring_slot *s = slot_at(r, *seq);
        if (s->hole > *off) {
            *src = NULL;
            *n = (size_t)(s->hole - *off);
            return RING_HOLE;
        }
        if (s->len > *off) {
            *src = pool_data(&r->pool, s->block) + *off;
            *n = s->len - *off;
            return RING_DATA;
        }
        if (!s->sealed)
            break;
        (*seq)++;
        *off = 0;
    }
    return RING_END;
}

bool ring_range_last_locked(const struct ring *r, uint64_t seq, size_t off, size_t n)
{
    if (!r->input_done || seq + 1 != r->head)
        return false;
    const struct ring_slot *s = slot_at(r, seq);
    return s->sealed && off + n == s->len;
}

bool ring_ended_at_locked(const struct ring *r, uint64_t seq)
{
    return r->input_done && seq == r->head;
}

void ring_wait_locked(struct ring *r, struct ring_cursor *c)
{
    wait_for_data_locked(r, c);
}

bool ring_last_locked(const struct ring *r, const struct ring_cursor *c, size_t n)
{
    if (!r->input_done || c->seq + 1 != r->head)
        return false;
    const struct ring_slot *s = slot_at(r, c->seq);
    return s->sealed && c->off + n == s->len;
}

void ring_cursor_place_locked(struct ring *r, struct ring_cursor *c, uint64_t seq, size_t off,
                              uint64_t bytes, uint64_t holes, bool live)
{
    c->seq = seq;
    c->off = off;
    c->bytes = bytes;
    c->holes = holes;
    c->live = live;
    ring_release_locked(r);
}

void ring_drop_locked(struct ring *r, struct ring_cursor *c)
{
    if (c->live) {
        c->live = false;
        if (c->counts)
            r->live_outputs--;
    }
    ring_release_locked(r);
    sync_broadcast(&r->data_cv);
}
