/*
 * pool.h - the buffer's memory: nblocks blocks carved from one reservation.
 *
 * Contract: pool_init() reserves block_size * nblocks bytes with one
 * anonymous mapping and carves it into blocks.  When the block size is only
 * known later (a stream being decoded declares its own), pool_reserve()
 * takes the address space at startup, so that running out of it is
 * reported before any connection is made, and pool_carve() cuts it into
 * blocks once, before the first block is taken.  Nothing is touched, so the kernel commits a page only
 * when data is first written to it: RSS follows the data actually held, not
 * -m.  Free blocks sit on a stack and are reused newest-first, so a pipeline
 * whose consumer keeps up cycles through a few hot blocks and a small RSS
 * however large the buffer is.
 *
 * Free blocks deep in the stack have not been used for a while; the main
 * thread trims their pages now and then (pool_trim_locked).
 *
 * The pool has no lock of its own: pool_take_locked() and
 * pool_release_locked() are called with the pipeline lock held.  Block data
 * is owned by whoever took the block until it is released.
 */
#ifndef WEIR_POOL_H
#define WEIR_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/error.h"

struct pool {
    unsigned char *base;  /* the reservation */
    size_t reserved;      /* its bytes */
    size_t stride;        /* bytes between block starts (block_size, 64-aligned) */
    size_t block_size;    /* usable bytes per block */
    uint32_t nblocks;
    uint32_t *free;       /* stack of free block indices, top = most recently freed */
    uint32_t nfree;
    unsigned char *touched;   /* per block: it may hold committed pages */
};

/* Fails (WEIR_EXIT_INTERNAL) when the address space cannot be reserved. */
int pool_init(struct pool *pool, size_t block_size, uint32_t nblocks, struct weir_error *err);
int pool_reserve(struct pool *pool, size_t bytes, struct weir_error *err);
/* The stride (bytes between block starts) of blocks of block_size bytes. */
size_t pool_stride(size_t block_size);
/* Cut the reservation into nblocks blocks of block_size bytes; nblocks *
 * pool_stride(block_size) must fit in it.  Called once, with the pipeline
 * lock held if other threads exist. */
int pool_carve(struct pool *pool, size_t block_size, uint32_t nblocks, struct weir_error *err);
void pool_destroy(struct pool *pool);

static inline unsigned char *pool_data(const struct pool *pool, uint32_t idx)
{
    return pool->base + (size_t)idx * pool->stride;
}

/* Caller holds the pipeline lock.  Returns false when no block is free. */
bool pool_take_locked(struct pool *pool, uint32_t *idx);
void pool_release_locked(struct pool *pool, uint32_t idx);
/* Give back to the kernel the pages of free blocks below the `keep` most
 * recently freed ones, at most `max` blocks per call, so that RSS follows the
 * data held after a burst.  Returns the number of blocks trimmed. */
uint32_t pool_trim_locked(struct pool *pool, uint32_t keep, uint32_t max);

#endif
