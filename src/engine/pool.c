/* pool.c - see pool.h. */
#include "engine/pool.h"
#include "os/os.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    return ps > 0 ? (size_t)ps : 4096;
}

size_t pool_stride(size_t block_size)
{
    /* large blocks start on page boundaries, so trimming one cannot touch
     * its neighbour; small ones are only cache-line aligned */
    size_t align = block_size >= 65536 ? page_size() : 64;
    return (block_size + align - 1) & ~(align - 1);
}

int pool_reserve(struct pool *pool, size_t bytes, struct weir_error *err)
{
    memset(pool, 0, sizeof *pool);
    /* address space only: pages are committed when touched */
    void *base = os_reserve(bytes);
    if (!base)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno,
                         "buffer: cannot reserve %zu bytes (-m)", bytes);
    pool->base = base;
    pool->reserved = bytes;
    return 0;
}

int pool_carve(struct pool *pool, size_t block_size, uint32_t nblocks, struct weir_error *err)
{
    size_t stride = pool_stride(block_size);
    if (nblocks == 0 || stride * nblocks > pool->reserved)
        return error_set(err, WEIR_EXIT_INTERNAL,
                         "buffer: %u blocks of %zu bytes do not fit the reservation",
                         nblocks, block_size);
    uint32_t *free_stack = malloc(sizeof *free_stack * nblocks);
    unsigned char *touched = calloc(nblocks, 1);
    if (!free_stack || !touched) {
        free(free_stack);
        free(touched);
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM,
                         "buffer: cannot allocate the table of %u blocks", nblocks);
    }
    pool->block_size = block_size;
    pool->stride = stride;
    pool->nblocks = nblocks;
    pool->free = free_stack;
    pool->touched = touched;
    /* Block 0 on top: the first blocks used are the lowest addresses. */
    for (uint32_t i = 0; i < nblocks; i++)
        pool->free[i] = nblocks - 1 - i;
    pool->nfree = nblocks;
    return 0;
}

int pool_init(struct pool *pool, size_t block_size, uint32_t nblocks, struct weir_error *err)
{
    if (pool_reserve(pool, pool_stride(block_size) * nblocks, err))
        return -1;
    if (pool_carve(pool, block_size, nblocks, err)) {
        pool_destroy(pool);
        return -1;
    }
    return 0;
}

void pool_destroy(struct pool *pool)
{
    if (pool->base)
        munmap(pool->base, pool->reserved);
    free(pool->free);
    free(pool->touched);
    pool->base = NULL;
    pool->free = NULL;
    pool->touched = NULL;
}

bool pool_take_locked(struct pool *pool, uint32_t *idx)
{
    if (pool->nfree == 0)
        return false;
    *idx = pool->free[--pool->nfree];
    pool->touched[*idx] = 1;
    return true;
}

void pool_release_locked(struct pool *pool, uint32_t idx)
{
    pool->free[pool->nfree++] = idx;
}

uint32_t pool_trim_locked(struct pool *pool, uint32_t keep, uint32_t max)
{
    uint32_t trimmed = 0;
    if (pool->nfree <= keep)
        return 0;
    for (uint32_t i = 0; i < pool->nfree - keep && trimmed < max; i++) {
        uint32_t idx = pool->free[i];
        if (!pool->touched[idx])
            continue;
        /* only the pages wholly inside this block: madvise rounds the length
         * up to a page, which would zero the start of the next block */
        uintptr_t ps = page_size(), start = (uintptr_t)pool_data(pool, idx);
        uintptr_t first = (start + ps - 1) & ~(ps - 1);
        uintptr_t last = (start + pool->block_size) & ~(ps - 1);
        /* a failure only means the pages stay resident */
        if (last <= first || madvise((void *)first, last - first, MADV_DONTNEED) == 0)
            pool->touched[idx] = 0;
        trimmed++;
    }
    return trimmed;
}
