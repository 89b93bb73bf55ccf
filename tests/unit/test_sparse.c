/*
 * test_sparse.c - finding holes: the zero test at every length and with a
 * byte set at every place, the runs of zero grains at every alignment, cut
 * by the bytes read and by the end, and a sparse file's extents read back
 * into the same bytes with its large holes found.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "format/sparse.h"

static void all_zero(void)
{
    unsigned char buf[200];
    memset(buf, 0, sizeof buf);
    for (size_t n = 0; n <= sizeof buf; n++) {
        CHECK(sparse_all_zero(buf, n), "%zu zeros", n);
        for (size_t at = 0; at < n; at += n > 40 ? 7 : 1) {
            buf[at] = 0x40;
            CHECK(!sparse_all_zero(buf, n), "%zu bytes, one set at %zu", n, at);
            buf[at] = 0;
        }
    }
    CHECK(sparse_all_zero(sparse_zeros(), SPARSE_ZEROS_SIZE), "the zero buffer is zeros");
}

/* The runs of p (n bytes at offset at), as "Z4096 D100 ..." */
static void runs(const unsigned char *p, size_t n, uint64_t at, bool final, char *out,
                 size_t cap)
{
    size_t pos = 0, len = 0;
    out[0] = '\0';
    while (pos < n) {
        bool zero;
        size_t run = sparse_run(p + pos, n - pos, at + pos, final, &zero);
        if (run == 0) {
            len += (size_t)snprintf(out + len, cap - len, "%s?%zu", len ? " " : "", n - pos);
            return;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%c%zu", len ? " " : "",
                                zero ? 'Z' : 'D', run);
        pos += run;
    }
}

static void run_cases(void)
{
    static unsigned char buf[5 * SPARSE_GRAIN];
    char got[200];
    memset(buf, 0, sizeof buf);
    runs(buf, sizeof buf, 0, false, got, sizeof got);
    CHECK(strcmp(got, "Z20480") == 0, "all zeros, aligned: %s", got);
    runs(buf, 5000, 0, false, got, sizeof got);
    CHECK(strcmp(got, "Z4096 ?904") == 0, "a cut grain of zeros waits: %s", got);
    runs(buf, 5000, 0, true, got, sizeof got);
    CHECK(strcmp(got, "Z5000") == 0, "unless the input ends there: %s", got);
    runs(buf, 5000, 100, false, got, sizeof got);
    CHECK(strcmp(got, "Z3996 ?1004") == 0, "grains follow the offset: %s", got);
    buf[4096 + 17] = 1;
    runs(buf, sizeof buf, 0, false, got, sizeof got);
    CHECK(strcmp(got, "Z4096 D4096 Z12288") == 0, "one byte makes its grain data: %s", got);
    runs(buf, 5000, 0, false, got, sizeof got);
    CHECK(strcmp(got, "Z4096 D904") == 0, "a cut grain with a byte set is data: %s", got);
    buf[3 * 4096] = 1;
    buf[3 * 4096 + 4095] = 1;
    runs(buf, sizeof buf, 0, true, got, sizeof got);
    CHECK(strcmp(got, "Z4096 D4096 Z4096 D4096 Z4096") == 0, "alternating: %s", got);
    runs(buf, sizeof buf, 2048, true, got, sizeof got);
    CHECK(strcmp(got, "Z2048 D4096 Z4096 D8192 Z2048") == 0, "half a grain off: %s", got);
    runs(buf, 3, 0, false, got, sizeof got);
    CHECK(strcmp(got, "?3") == 0, "three zeros wait: %s", got);
}

/* A sparse file: its extents and holes give back its bytes, and the large
 * holes are found (a file system keeps data in blocks, so a little zero
 * around the data may count as data). */
static void extents(void)
{
    char path[] = "/tmp/weir-test-sparse.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temporary file");
    unlink(path);
    const uint64_t size = 64ull << 20;
    CHECK(ftruncate(fd, (off_t)size) == 0, "ftruncate");
    static const uint64_t at[] = {1 << 20, (5 << 20) + 100, (40 << 20) - 3000};
    unsigned char data[10000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7 + 1);
    for (int i = 0; i < 3; i++)
        CHECK(pwrite(fd, data, sizeof data, (off_t)at[i]) == (ssize_t)sizeof data, "pwrite");
    CHECK(lseek(fd, 4096, SEEK_SET) == 4096, "start inside the first hole");
    struct sparse_extents x;
    CHECK(sparse_extents_init(&x, fd) == 0 && x.pos == 4096, "init at the offset");
    unsigned char *copy = calloc(1, size);
    uint64_t pos = 4096, holes = 0;
    for (;;) {
        uint64_t hole, avail;
        CHECK(sparse_extents_next(&x, &hole, &avail) == 0, "next");
        if (hole) {
            holes += hole;
            pos += hole;
            CHECK(x.pos == pos && lseek(fd, 0, SEEK_CUR) == (off_t)pos, "past the hole");
            continue;
        }
        size_t want = avail < 100000 ? (size_t)avail : 100000;
        ssize_t n = read(fd, copy + pos, want);
        CHECK(n >= 0, "read");
        if (n == 0)
            break;
        sparse_extents_read(&x, (size_t)n);
        pos += (uint64_t)n;
    }
    CHECK(pos == size, "read to the end: %llu", (unsigned long long)pos);
    int same = 1;
    for (int i = 0; i < 3; i++)
        same &= memcmp(copy + at[i], data, sizeof data) == 0;
    CHECK(same, "the data is where it was");
    if (x.on)
        CHECK(holes >= size - 4096 - 3 * (sizeof data + 2 * 65536), "holes found: %llu",
              (unsigned long long)holes);
    free(copy);
    close(fd);
}

int main(void)
{
    all_zero();
    run_cases();
    extents();
    CHECK_DONE();
}
