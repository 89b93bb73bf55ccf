/*
 * sparse.h - finding holes in what weir reads: a regular file's data
 * extents (lseek SEEK_DATA and SEEK_HOLE), and runs of zeros in data
 * (--sparse, the way cp --sparse=always finds them).
 *
 * Contract: the zero scanner (sparse_all_zero, sparse_run) is pure and any
 * thread may call it.  A struct sparse_extents belongs to the thread that
 * owns the descriptor (the engine's reader); it moves the descriptor's
 * offset, which is always where the next data byte is to be read.  The
 * zero buffer is read-only, shared by every thread.
 *
 * Holes are found in grains of SPARSE_GRAIN bytes aligned to the offset in
 * the data (from where weir started reading): a grain that is all zeros is
 * a hole.  A grain cut short by a hole or by the end of the input counts as
 * well, so a file's trailing zeros become a hole; a grain cut short by the
 * bytes read so far waits for the rest, unless it already holds a byte
 * that is not zero.
 */
#ifndef WEIR_SPARSE_H
#define WEIR_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPARSE_GRAIN 4096u
#define SPARSE_ZEROS_SIZE (4u << 20)   /* CODEC_BLOCK_MAX: a whole block of zeros */

/* SPARSE_ZEROS_SIZE bytes of zeros (never written, so they cost no memory). */
const unsigned char *sparse_zeros(void);

bool sparse_all_zero(const void *p, size_t n);

/* The run that starts at p (n bytes, the first at offset at in the data):
 * its length, and *zero when it is a hole.  A run is made of whole grains
 * of one kind.  0 when the first grain cannot be judged yet (it is cut
 * short by n and all zeros so far); final: n ends at a hole or at the end
 * of the input, so a grain cut there is judged as it is. */
size_t sparse_run(const unsigned char *p, size_t n, uint64_t at, bool final, bool *zero);

/* A regular file's data extents, read from the descriptor's offset on.
 * Small extents scattered over a file are read one at a time, each a seek
 * of the disk: the extents ahead of the reader are asked for at once
 * (POSIX_FADV_WILLNEED), up to SPARSE_PREFETCH bytes of them, so that the
 * disk has many to serve together. */
#define SPARSE_PREFETCH (16u << 20)
#define SPARSE_PREFETCH_EXTENT (1u << 20)   /* larger ones are the kernel's readahead's */
struct sparse_extents {
    int fd;
    bool on;             /* holes are looked for; false: everything is data */
    uint64_t pos;        /* the file offset of the next byte */
    uint64_t data_end;   /* where the data extent being read ends (pos: look again) */
    uint64_t ahead;      /* extents before this offset were asked for */
    uint64_t asked, got; /* data bytes asked for, and read */
    bool ahead_done;     /* no data after ahead */
};

/* Start at fd's offset.  -1 with errno if the offset cannot be read. */
int sparse_extents_init(struct sparse_extents *x, int fd);
/* What lies at x->pos: a hole of *hole bytes (the offset moves past it; a
 * trailing hole ends at the file's size), or data (*hole 0): at most *data
 * bytes before the next hole, UINT64_MAX when no hole is known ahead
 * (read on until the end).  A file system that cannot say where its holes
 * are makes everything data.  -1 with errno when lseek fails otherwise. */
int sparse_extents_next(struct sparse_extents *x, uint64_t *hole, uint64_t *data);
/* n bytes of data were read at x->pos. */
void sparse_extents_read(struct sparse_extents *x, size_t n);

#endif
