/*
 * zstd.c - --zstd's pieces: one zstd frame per piece of a block, between
 * its 'Y' record and its 'B' record (codec.h), and the frames of zeros
 * that stand for a hole in a zstd file.  libzstd does the compression; the
 * caller owns the contexts, one per thread, so nothing here allocates.
 */
#include "format/codec.h"

#include <limits.h>
#include <stdint.h>
#include <zstd.h>

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

size_t codec_encode_zstd(const unsigned char *src, size_t len, unsigned char *dst, void *cctx,
                         int level, uint64_t seq, uint32_t piece_max, unsigned sums)
{
    size_t pos = 0;
    for (size_t off = 0; off < len; off += piece_max, seq++) {
        size_t n = len - off < piece_max ? len - off : piece_max;
        unsigned char *frame = dst + pos + CODEC_ANNOUNCE_SIZE;
        size_t s = one_frame(cctx, frame, CODEC_ZSTD_BOUND(n), src + off, n, level);
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
