/* sparse.c - see sparse.h. */
#include "format/sparse.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "os/os.h"

/* In .bss: pages that are only read map the kernel's zero page. */
static unsigned char zero_block[SPARSE_ZEROS_SIZE];

const unsigned char *sparse_zeros(void)
{
    return zero_block;
}

bool sparse_all_zero(const void *p, size_t n)
{
    /* the first 16 bytes one by one, then each byte against the one 16
     * before it: equal all along means zero all along (memcmp is vector
     * code in libc) */
    const unsigned char *b = p;
    size_t head = n < 16 ? n : 16;
    for (size_t i = 0; i < head; i++)
        if (b[i])
            return false;
    return n <= 16 || memcmp(b, b + 16, n - 16) == 0;
}

size_t sparse_run(const unsigned char *p, size_t n, uint64_t at, bool final, bool *zero)
{
    size_t pos = 0;
    int kind = -1;   /* of the run so far: 1 zeros, 0 data */
    while (pos < n) {
        size_t unit = SPARSE_GRAIN - (size_t)((at + pos) % SPARSE_GRAIN);
        bool cut = unit > n - pos;
        if (cut)
            unit = n - pos;
        int k = sparse_all_zero(p + pos, unit) ? 1 : 0;
        if (k == 1 && cut && !final)
            break;   /* the rest of the grain decides */
        if (kind >= 0 && k != kind)
            break;
        kind = k;
        pos += unit;
    }
    if (kind < 0)
        return 0;
    *zero = kind == 1;
    return pos;
}

int sparse_extents_init(struct sparse_extents *x, int fd)
{
    off_t at = lseek(fd, 0, SEEK_CUR);
    if (at < 0)
        return -1;
    *x = (struct sparse_extents){.fd = fd, .on = true, .pos = (uint64_t)at,
                                 .data_end = (uint64_t)at, .ahead = (uint64_t)at};
    return 0;
}

/* Ask for the small extents ahead of the reader, while less than
 * SPARSE_PREFETCH bytes of data lie between the reader and what was asked
 * for.  It moves the offset (the caller puts it back).  A hint: what fails
 * here only ends the asking (the reader's own lseek reports real errors). */
static void prefetch(struct sparse_extents *x)
{
    if (x->ahead < x->data_end) {
        /* the reader caught up: what is asked for starts after its extent */
        x->ahead = x->data_end;
        x->asked = x->got + (x->data_end - x->pos);
    }
    if (x->ahead_done || x->asked - x->got > SPARSE_PREFETCH / 2)
        return;
    while (x->asked - x->got < SPARSE_PREFETCH) {
        off_t d = lseek(x->fd, (off_t)x->ahead, SEEK_DATA);
        off_t h = d < 0 ? -1 : lseek(x->fd, d, SEEK_HOLE);
        if (h <= d) {
            x->ahead_done = true;
            break;
        }
        uint64_t len = (uint64_t)(h - d);
        if (len < SPARSE_PREFETCH_EXTENT)
            os_advise_willneed(x->fd, d, (off_t)len);
        x->asked += len;
        x->ahead = (uint64_t)h;
    }
}

/* The file system cannot say where its holes are: read it all. */
static int extents_off(struct sparse_extents *x, uint64_t *data)
{
    x->on = false;
    *data = UINT64_MAX;
    return lseek(x->fd, (off_t)x->pos, SEEK_SET) < 0 ? -1 : 0;
}

int sparse_extents_next(struct sparse_extents *x, uint64_t *hole, uint64_t *data)
{
    *hole = 0;
    *data = UINT64_MAX;
    if (!x->on)
        return 0;
    if (x->pos < x->data_end) {
        *data = x->data_end - x->pos;
        return 0;
    }
    off_t d = lseek(x->fd, (off_t)x->pos, SEEK_DATA);
    if (d < 0 && errno == ENXIO) {
        /* no data after pos: a hole to the end, if the file goes further */
        off_t end = lseek(x->fd, 0, SEEK_END);
        if (end < 0)
            return -1;
        if ((uint64_t)end > x->pos) {
            *hole = (uint64_t)end - x->pos;
            x->pos = x->data_end = (uint64_t)end;
            return 0;
        }
        /* at the end: read on, which ends the input (or finds what was
         * appended meanwhile) */
        return lseek(x->fd, (off_t)x->pos, SEEK_SET) < 0 ? -1 : 0;
    }
    if (d < 0 && (errno == EINVAL || errno == EOPNOTSUPP ||
                  errno == ESPIPE))
        return extents_off(x, data);
    if (d < 0)
        return -1;
    off_t h = lseek(x->fd, d, SEEK_HOLE);
    if (h < 0 && (errno == EINVAL || errno == EOPNOTSUPP))
        return extents_off(x, data);
    if (h < 0)
        return -1;
    uint64_t before = (uint64_t)d - x->pos;   /* a hole, or 0 */
    x->pos = (uint64_t)d;
    x->data_end = h > d ? (uint64_t)h : UINT64_MAX;
    if (x->data_end - x->pos < SPARSE_PREFETCH_EXTENT)
        prefetch(x);
    if (lseek(x->fd, d, SEEK_SET) < 0)
        return -1;
    if (before) {
        *hole = before;
        return 0;
    }
    *data = x->data_end - x->pos;
    return 0;
}

void sparse_extents_read(struct sparse_extents *x, size_t n)
{
    x->pos += n;
    x->got += n;
    if (x->pos > x->data_end)
        x->data_end = x->pos;   /* the file grew under the reader: look again */
}
