/*
 * test_pool.c - blocks are handed out newest-first, and trimming the pages of
 * free blocks never touches a block in use, whatever the block size.
 */
#include <string.h>

#include "check.h"
#include "engine/pool.h"

static void trim_spares_neighbours(size_t block_size)
{
    struct pool pool;
    struct weir_error err;
    CHECK(pool_init(&pool, block_size, 64, &err) == 0, "pool_init: %s", err.msg);
    uint32_t idx[64];
    for (int i = 0; i < 64; i++) {
        CHECK(pool_take_locked(&pool, &idx[i]), "take %d", i);
        memset(pool_data(&pool, idx[i]), 0xA5, block_size);
    }
    /* free every other block; the ones in use sit between free ones */
    for (int i = 0; i < 64; i += 2)
        pool_release_locked(&pool, idx[i]);
    CHECK(pool_trim_locked(&pool, 0, 64) == 32, "all 32 free blocks trimmed");
    for (int i = 1; i < 64; i += 2) {
        const unsigned char *d = pool_data(&pool, idx[i]);
        size_t k = 0;
        while (k < block_size && d[k] == 0xA5)
            k++;
        CHECK(k == block_size, "block of %zu bytes: byte %zu of a block in use changed",
              block_size, k);
    }
    pool_destroy(&pool);
}

int main(void)
{
    struct pool pool;
    struct weir_error err;
    CHECK(pool_init(&pool, 1000, 4, &err) == 0, "pool_init");
    uint32_t a, b, c;
    CHECK(pool_take_locked(&pool, &a) && a == 0, "first block is block 0");
    CHECK(pool_take_locked(&pool, &b) && b == 1, "then block 1");
    pool_release_locked(&pool, a);
    CHECK(pool_take_locked(&pool, &c) && c == a, "the most recently freed block comes back");
    pool_destroy(&pool);
    size_t sizes[] = {1000, 4096, 65536 + 47, (1u << 20) + 47, 3 * 4096 + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        trim_spares_neighbours(sizes[i]);
    CHECK_DONE();
}
