/*
 * zstd.c - --zstd's pieces: one zstd frame per piece of a block, between
 * its 'Y' record and its 'B' record (codec.h), and the frames of zeros
 * that stand for a hole in a zstd file.  libzstd does the compression; the
 * caller owns the contexts, one per thread, made on first use by
 * codec_zstd_cctx() and codec_zstd_dctx(), which are all that allocates.
 */
#include "format/codec.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

/* A stored frame (RFC 8878, 3.1.1): its header says a single segment, the
 * 8-byte content size and a content checksum; raw blocks of at most
 * 128 KiB follow, each after its 3-byte header, then the checksum. */
#define FRAME_STORED_HEADER 13       /* magic, descriptor, content size */
#define RAW_BLOCK_MAX (128u << 10)

size_t codec_zstd_room(size_t len, uint32_t piece_max)
{
    uint64_t n = codec_pieces(len, piece_max);
    size_t slack = CODEC_ZSTD_BOUND((size_t)piece_max) - piece_max;
    return len + (size_t)n * (CODEC_ZSTD_PIECE_OVERHEAD + slack);
}

/* One frame of src into dst (cap bytes), with its content size and
 * checksum, so that any zstd decoder can check it on its own.  Returns its
 * length, 0 on a failure. */
static size_t one_frame(ZSTD_CCtx *cc, unsigned char *dst, size_t cap,
                        const unsigned char *src, size_t len, int level)
{
    if (ZSTD_isError(ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1)))
        return 0;
    size_t n = ZSTD_compress2(cc, dst, cap, src, len);
    return ZSTD_isError(n) ? 0 : n;
}

/* One stored frame of len bytes into dst; returns its length. */
static size_t stored_frame(unsigned char *dst, const unsigned char *src, size_t len)
{
    codec_put32(dst, CODEC_ZSTD_MAGIC);
    dst[4] = 0xE4;   /* content size in 8 bytes, single segment, checksum */
    codec_put64(dst + 5, len);
    size_t pos = FRAME_STORED_HEADER, off = 0;
    do {
        size_t n = len - off < RAW_BLOCK_MAX ? len - off : RAW_BLOCK_MAX;
        uint32_t head = (uint32_t)(n << 3) | (off + n == len ? 1u : 0u);   /* raw, last? */
        dst[pos] = (unsigned char)head;
        dst[pos + 1] = (unsigned char)(head >> 8);
        dst[pos + 2] = (unsigned char)(head >> 16);
        memcpy(dst + pos + 3, src + off, n);
        pos += 3 + n;
        off += n;
    } while (off < len);
    codec_put32(dst + pos, (uint32_t)XXH64(src, len, 0));
    return pos + 4;
}

/* The pieces of len bytes, each frame compressed at level with cctx, or
 * stored when cctx is NULL; 0 when zstd failed. */
static size_t pieces(const unsigned char *src, size_t len, unsigned char *dst, void *cctx,
                     int level, uint64_t seq, uint32_t piece_max, unsigned sums)
{
    size_t pos = 0;
    for (size_t off = 0; off < len; off += piece_max, seq++) {
        size_t n = len - off < piece_max ? len - off : piece_max;
        unsigned char *frame = dst + pos + CODEC_ANNOUNCE_SIZE;
        size_t s = cctx ? one_frame(cctx, frame, CODEC_ZSTD_BOUND(n), src + off, n, level)
                        : stored_frame(frame, src + off, n);
        if (s == 0 || s > UINT32_MAX)
            return 0;
        codec_announce(dst + pos, 'Y', (uint32_t)s);
        uint64_t hash = 0;
        if (sums & CODEC_SUMS_WEIR)
            hash = codec_wire_hash(codec_block_hash(src + off, n, seq), frame, s);
        codec_block_record(frame + s, seq, (uint32_t)n, hash);
        pos += CODEC_ZSTD_PIECE_OVERHEAD + s;
    }
    return pos;
}

size_t codec_encode_zstd(const unsigned char *src, size_t len, unsigned char *dst, void *cctx,
                         int level, uint64_t seq, uint32_t piece_max, unsigned sums)
{
    return cctx ? pieces(src, len, dst, cctx, level, seq, piece_max, sums) : 0;
}

size_t codec_store_zstd(const unsigned char *src, size_t len, unsigned char *dst, uint64_t seq,
                        uint32_t piece_max, unsigned sums)
{
    return pieces(src, len, dst, NULL, 0, seq, piece_max, sums);
}

size_t codec_zstd_zeros(unsigned char *dst, size_t cap, void *cctx, const unsigned char *zeros,
                        size_t len)
{
    if (len == 0 || len > CODEC_BLOCK_MAX || cap <= CODEC_ANNOUNCE_SIZE)
        return 0;
    size_t s = one_frame(cctx, dst + CODEC_ANNOUNCE_SIZE, cap - CODEC_ANNOUNCE_SIZE, zeros,
                         len, 1);
    if (s == 0)
        return 0;
    codec_announce(dst, 'z', (uint32_t)s);
    return CODEC_ANNOUNCE_SIZE + s;
}

long codec_decode_zstd(void *dctx, const unsigned char *src, size_t wire_len,
                       unsigned char *dst, size_t cap)
{
    /* one frame, and no more: its declared size must fit, and the frame
     * must take the whole payload (a second frame hidden behind it would
     * be data the block's record does not describe) */
    unsigned long long size = ZSTD_getFrameContentSize(src, wire_len);
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > cap ||
        ZSTD_findFrameCompressedSize(src, wire_len) != wire_len)
        return -1;
    size_t n = ZSTD_decompressDCtx(dctx, dst, cap, src, wire_len);
    if (ZSTD_isError(n) || n != size || n > (size_t)LONG_MAX)
        return -1;
    return (long)n;
}

void *codec_zstd_cctx(void **cctx)
{
    if (!*cctx)
        *cctx = ZSTD_createCCtx();
    return *cctx;
}

void *codec_zstd_dctx(void **dctx)
{
    if (!*dctx)
        *dctx = ZSTD_createDCtx();
    return *dctx;
}

void codec_zstd_free(void **cctx, void **dctx)
{
    if (cctx && *cctx)
        ZSTD_freeCCtx(*cctx);
    if (dctx && *dctx)
        ZSTD_freeDCtx(*dctx);
    if (cctx)
        *cctx = NULL;
    if (dctx)
        *dctx = NULL;
}
