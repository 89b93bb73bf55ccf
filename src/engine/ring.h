/*
 * ring.h - the buffer: pool blocks in a ring of slots indexed by sequence
 * number (seq & mask), and the cursors that read them.
 *
 * Contract: one ring per engine, guarded by the engine's mutex (r->lock).
 * Functions named *_locked are called with it held; the others take it
 * themselves and may wait on the ring's two condition variables: data_cv
 * (cursors wait for data, the end, or -P's gate) and space_cv (the reader
 * waits for a free block, the workers to settle, a cursor to move).  Every
 * wait ends when *r->stop is set and the condition variables are broadcast
 * (ring_stop_locked).
 *
 * Slots are created in order at head by the reader (ring_fill_*, ring_add)
 * or for a worker (a pending slot that ring_present_locked fills later);
 * ready is the first slot not yet present, and no cursor passes it, so data
 * leaves in order.  Each reader of the buffer (an output's writer, the
 * content checksum of a split LZ4 frame) has a cursor; a slot's block goes
 * back to the pool once every live cursor has passed it (tail).  The ring
 * also keeps the fill (what the slowest live cursor has yet to read, plus
 * what the workers hold), -P's gate and -p's throttle, and the time spent
 * empty and full for the summary's verdict.
 *
 * Block data is owned by whoever took the block until it is released, and
 * a slot's published bytes are read only below its published length, so
 * data is copied with the lock released.
 *
 * A hole (ring_add_hole) is a slot of its own that holds no block: a
 * length of zeros, and for -z its number in the weir stream.  A cursor
 * meets it as RING_HOLE and steps over it in as many pieces as it likes
 * (a file seeks over it at once, a pipe is written zeros).  Holes take no
 * memory and count for no fill; the slot table has room for as many hole
 * slots as there are blocks, beyond the blocks' own.
 */
#ifndef WEIR_RING_H
#define WEIR_RING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/pool.h"
#include "weir/error.h"

#define RING_MAX_CURSORS 40   /* each output's, its hold's (resuming), the content's */
#define RING_MAX_BLOCKS (1u << 18)   /* blocks of a decoding buffer, at most */

#define RING_NO_BLOCK UINT32_MAX

struct ring_slot {
    uint32_t block;     /* pool index; RING_NO_BLOCK for a hole */
    bool present;       /* the data is there (a worker's slot may be pending) */
    bool sealed;        /* no more bytes will be added */
    size_t len;         /* bytes published */
    uint64_t raw_len;   /* -z: raw bytes its pieces hold (0: the end) */
    uint64_t hole;      /* a hole: this many bytes of zeros (len is 0) */
    uint64_t hole_seq;  /* -z: the hole's number in the weir stream */
};

struct ring_cursor {
    uint64_t seq;       /* lock: the slot being read */
    size_t off;         /*       bytes of it read */
    uint64_t bytes;     /*       bytes read in all (holes not counted) */
    uint64_t holes;     /*       hole bytes stepped over */
    uint64_t hole_seq;  /* the hole ring_next returned last: its -z number (the cursor's
                           own thread reads it) */
    bool live;          /*       holds blocks back (a failed output does not) */
    bool waiting;       /*       in ring_next's wait */
    bool counts;        /* an output: it counts for the fill and the verdict */
    bool holder;        /* holds blocks for a connection that may resume: it counts
                           for the fill, not for the verdict */
    atomic_bool *halt;  /* this reader must stop (its output failed, or all stop) */
    const bool *broken; /* lock; when set, a wait for data ends (RING_BROKEN): its
                           connection broke and its writer reconnects; NULL: none */
};

/* ring_next's results */
enum { RING_DATA = 1, RING_HOLE = 2, RING_END = 0, RING_STOP = -1, RING_BROKEN = -2 };

struct ring {
    pthread_mutex_t *lock;      /* the engine's */
    atomic_bool *stop;          /* the engine's */
    pthread_cond_t data_cv, space_cv;

    struct pool pool;           /* lock (take, release, carve) */
    bool carved;                /* lock: the pool has its blocks */
    size_t unit;                /* bytes of data a block holds */
    struct ring_slot *slot;     /* lock */
    uint64_t mask;
    uint64_t head;              /* lock: next slot to create */
    uint64_t ready;             /* lock: slots before this are all present */
    uint64_t tail;              /* lock: oldest slot still held */
    bool filling;               /* lock: slot head-1 is the reader's, unsealed */
    bool input_done;            /* lock: no slot will be added */
    uint32_t read_window;       /* lock: blocks a regular-file input may hold; 0: all */
    uint32_t read_lead;         /* lock: and may keep ahead of the held ones at least */
    uint32_t reserved;          /* lock: blocks promised to queued jobs */
    uint64_t hole_slots;        /* lock: hole slots between tail and head */
    uint64_t held_back;         /* lock: slots kept only by holds (resuming): the read
                                   window counts them, but the reader may always
                                   be a quarter of it ahead of the outputs */

    int start_pct, resume_pct;  /* -P, -p */
    bool gate_open;             /* lock: -P allows reading */
    bool throttled;             /* lock: -p holds the reader back */

    struct ring_cursor *cursor[RING_MAX_CURSORS];   /* lock */
    int ncursors, live_outputs;

    /* a hook for each slot as it becomes ready, in order (-z folds its
     * pieces into the trailer's chain here); lock held */
    void (*on_ready)(void *ctx, const struct ring_slot *s);
    void *on_ready_ctx;

    /* accounting, lock */
    uint64_t queued_bytes;      /* bytes put into slots */
    uint64_t staging_bytes;     /* bytes in blocks queued for the workers */
    uint64_t min_out;           /* bytes read by the slowest live output */
    double t_start;             /* 0 until the input is open */
    double empty_since;         /* >= 0 while every live output waits for data */
    bool empty_on_workers;      /*   ... and blocks are still being transformed */
    double t_empty, t_full, t_workers, t_input_end;
};

void ring_init(struct ring *r, pthread_mutex_t *lock, atomic_bool *stop, int start_pct,
               int resume_pct);
void ring_destroy(struct ring *r);
/* Address space for the buffer, reserved before anything connects. */
int ring_reserve(struct ring *r, size_t bytes, struct weir_error *err);
/* Cut the reservation into nblocks blocks of block bytes (unit bytes of
 * data each) with their slot table.  Before threads, or with the lock. */
int ring_carve_locked(struct ring *r, size_t block, size_t unit, uint64_t nblocks,
                      struct weir_error *err);
void ring_add_cursor(struct ring *r, struct ring_cursor *c, atomic_bool *halt, bool counts);
void ring_stop_locked(struct ring *r);

/* ---- the reader ---- */
/* Take a free block, keeping what queued jobs were promised; extra is 1
 * when the block will feed a job (which needs one more).  Waits while the
 * buffer is full, -p holds the reader, or a file input is at its window;
 * false when stopping. */
bool ring_take_block(struct ring *r, uint32_t extra, uint32_t *idx);
void ring_return_block_locked(struct ring *r, uint32_t idx);
/* Room for at least want contiguous bytes in the filling slot (a new one
 * when the current one lacks it); false when stopping. */
bool ring_fill_reserve(struct ring *r, size_t want, unsigned char **dst, size_t *cap);
/* Publish n bytes written at the filling slot's end.  Lock held. */
void ring_fill_publish_locked(struct ring *r, size_t n);
void ring_seal_locked(struct ring *r);
/* A new slot at head: present with len bytes of block, or pending (a
 * worker's result) when block is RING_PENDING.  Returns its seq. */
#define RING_PENDING UINT32_MAX
uint64_t ring_add_locked(struct ring *r, uint32_t block, size_t len);
/* A worker's result arrives in its pending slot. */
void ring_present_locked(struct ring *r, uint64_t seq, uint32_t block, size_t len,
                         uint64_t raw_len);
/* A hole of len bytes at head (the filling slot is sealed first, or, if
 * nothing was published in it, becomes the hole); seq is its -z number.
 * Waits while the slot table holds as many holes as there are blocks;
 * false when stopping. */
bool ring_add_hole(struct ring *r, uint64_t len, uint64_t seq);
/* Wait until every slot created so far is present; false when stopping. */
bool ring_wait_settled_locked(struct ring *r);
/* The input is open: time counts from now, and outputs that already wait
 * for data (they start before a listener admits its sender) now wait on
 * the input, as they would had they begun to wait after it opened. */
void ring_start_locked(struct ring *r);
/* The input ended (or failed): seal, and let the cursors drain. */
void ring_finish_locked(struct ring *r);

/* ---- the cursors ---- */
/* Wait for data at c: RING_DATA with (*src, *n) to read, RING_HOLE with
 * *src NULL and *n the bytes of the hole left (c->hole_seq its number),
 * RING_END when everything was read, RING_STOP when c->halt is set,
 * RING_BROKEN when c->broken is (before waiting). */
int ring_next(struct ring *r, struct ring_cursor *c, const unsigned char **src, size_t *n);
/* The same without waiting (lock held): RING_DATA or RING_HOLE, or
 * RING_END when there is nothing to read now. */
int ring_peek_locked(struct ring *r, struct ring_cursor *c, const unsigned char **src,
                     size_t *n);
/* The next published range at (*seq, *off), ahead of a cursor that holds
 * the blocks (sealing ahead of a writer): RING_DATA with (*src, *n), or
 * RING_HOLE with *n the bytes of the hole left at *off, the position
 * stepped over slots read in full; RING_END when there is none now.
 * Honours -P's gate. */
int ring_range_locked(struct ring *r, uint64_t *seq, size_t *off, const unsigned char **src,
                      size_t *n);
/* The -z number of the hole in slot seq. */
uint64_t ring_hole_seq_locked(const struct ring *r, uint64_t seq);
/* Whether the range (seq, off, n) ends the last slot of a finished input. */
bool ring_range_last_locked(const struct ring *r, uint64_t seq, size_t off, size_t n);
/* Whether everything the input will ever put in the ring lies before seq. */
bool ring_ended_at_locked(const struct ring *r, uint64_t seq);
/* Wait for the ring to change, as a cursor with nothing to read (the time is
 * counted as empty); lock held. */
void ring_wait_locked(struct ring *r, struct ring_cursor *c);
/* n bytes at c were read (or stepped over, in a hole); passed blocks are
 * released. */
void ring_advance_locked(struct ring *r, struct ring_cursor *c, size_t n);
/* Whether reading n more bytes at c reads the last byte the ring will ever
 * hold (the input ended and this is the end of its last slot). */
bool ring_last_locked(const struct ring *r, const struct ring_cursor *c, size_t n);
/* Put c at (seq, off), having read bytes and stepped over holes before it
 * (a hold moving on as the receiver confirms; a writer sent back to resend);
 * passed blocks are released (and the reader woken when that frees one).
 * live: whether it holds blocks from now on. */
void ring_cursor_place_locked(struct ring *r, struct ring_cursor *c, uint64_t seq, size_t off,
                              uint64_t bytes, uint64_t holes, bool live);
/* A cursor that stops holding blocks back (its output failed). */
void ring_drop_locked(struct ring *r, struct ring_cursor *c);
/* Release every block that every live cursor has passed. */
void ring_release_locked(struct ring *r);

/* ---- the fill ---- */
uint64_t ring_fill_locked(const struct ring *r);
uint64_t ring_capacity_locked(const struct ring *r);
/* -P: open the gate once the fill reaches the mark. */
void ring_gate_check_locked(struct ring *r);

#endif
