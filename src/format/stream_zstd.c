/*
 * stream_zstd.c - plain zstd data (stream.h, STREAM_ZSTD): any zstd
 * encoder's frames, decoded in order with libzstd's streaming decoder,
 * whose window is capped so that the memory a frame may ask for stays
 * within what the caller allows.  It uses stream.c's stage (stream_fill,
 * stream_consume); stream_free() frees its decoder.
 */
#include "format/stream.h"

#include <errno.h>
#include <stdio.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "format/codec.h"

/* zstd's window logs: the smallest any frame has, the largest a 64-bit
 * decoder takes (RFC 8878, 3.1.1.1.2) */
#define WINDOW_LOG_MIN 10
#define WINDOW_LOG_MAX 31
#define FRAME_HEADER_MAX 18   /* magic, descriptor, window, dictionary, size */

/* The largest power of two within window_max, as zstd's window log. */
static int window_log(uint64_t window_max)
{
    int log = WINDOW_LOG_MIN;
    while (log < WINDOW_LOG_MAX && ((uint64_t)1 << (log + 1)) <= window_max)
        log++;
    return log;
}

static int open_decoder(struct stream_decoder *d, struct weir_error *err)
{
    d->zstd_ds = ZSTD_createDStream();
    if (!d->zstd_ds)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "%s: zstd decoder", d->src.name);
    if (d->src.window_max &&
        ZSTD_isError(ZSTD_DCtx_setParameter(d->zstd_ds, ZSTD_d_windowLogMax,
                                            window_log(d->src.window_max))))
        return error_set(err, WEIR_EXIT_INTERNAL, "%s: zstd decoder", d->src.name);
    return 0;
}

/* A frame zstd would not decode: say why, and for a window too large, how
 * large against what is allowed. */
static int refused(struct stream_decoder *d, size_t code, struct weir_error *err)
{
    if (ZSTD_getErrorCode(code) == ZSTD_error_frameParameter_windowTooLarge)
        return error_set(err, WEIR_EXIT_INTEGRITY, "%s: a zstd frame near byte %llu needs a "
                         "window larger than the %llu MiB the buffer allows: give -m at "
                         "least its window (zstd -lv shows it)", d->src.name,
                         (unsigned long long)d->offset,
                         (unsigned long long)((uint64_t)1 << window_log(d->src.window_max)) >>
                             20);
    return error_set(err, WEIR_EXIT_INTEGRITY, "%s: corrupt zstd data near byte %llu: %s",
                     d->src.name, (unsigned long long)d->offset, ZSTD_getErrorName(code));
}

int stream_zstd_read(struct stream_decoder *d, void *dst, size_t cap, size_t *n,
                     struct weir_error *err)
{
    *n = 0;
    if (!d->zstd_ds && open_decoder(d, err))
        return -1;
    ZSTD_outBuffer out = {dst, cap, 0};
    for (;;) {
        if (d->pos == d->end) {
            int r = stream_fill(d, err);
            if (r < 0)
                return -1;
            if (r == 0) {
                if (d->zstd_in_frame)
                    return error_set(err, WEIR_EXIT_INTEGRITY, "%s: truncated zstd data at "
                                     "byte %llu (inside a frame)", d->src.name,
                                     (unsigned long long)d->offset);
                return 0;
            }
        }
        ZSTD_inBuffer in = {d->stage + d->pos, d->end - d->pos, 0};
        size_t hint = ZSTD_decompressStream(d->zstd_ds, &out, &in);
        if (ZSTD_isError(hint))
            return refused(d, hint, err);
        stream_consume(d, in.pos);
        /* 0: a frame ended, checked; anything else: more of it to come */
        d->zstd_in_frame = hint != 0;
        *n = out.pos;
        if (out.pos > 0 || hint == 0)
            return 0;
    }
}

/* A zstd frame's header at p (n bytes staged, at least the most a header
 * takes, or the input's end): its length and whether a checksum ends the
 * frame (RFC 8878, 3.1.1.1); 0 when it is not a zstd frame's, or cut. */
static size_t frame_header(const unsigned char *p, size_t n, bool *checksum)
{
    static const unsigned char did_len[4] = {0, 1, 2, 4}, fcs_len[4] = {0, 2, 4, 8};
    if (n < 5 || codec_get32(p) != CODEC_ZSTD_MAGIC || (p[4] & 0x08))   /* reserved bit */
        return 0;
    unsigned fhd = p[4];
    bool single = (fhd >> 5) & 1;
    size_t len = 5 + (single ? 0 : 1) + did_len[fhd & 3] +
                 ((fhd >> 6) == 0 ? (single ? 1 : 0) : fcs_len[fhd >> 6]);
    *checksum = (fhd >> 2) & 1;
    return len <= n ? len : 0;
}

int stream_zstd_whole(struct stream_decoder *d, size_t raw_max, uint64_t *raw,
                      struct weir_error *err)
{
    int r = stream_need(d, 1, err);
    if (r <= 0)
        return r < 0 ? -1 : STREAM_ZSTD_END;
    if (stream_need(d, FRAME_HEADER_MAX, err) < 0)
        return -1;
    const unsigned char *p = d->stage + d->pos;
    size_t n = d->end - d->pos;
    bool sum;
    unsigned long long size = ZSTD_getFrameContentSize(p, n);
    /* what this does not vouch for (a skippable frame, no size, a header
     * that is cut or wrong) the streaming decoder takes and judges */
    if (frame_header(p, n, &sum) == 0 || size == ZSTD_CONTENTSIZE_UNKNOWN ||
        size == ZSTD_CONTENTSIZE_ERROR || size == 0 || size > raw_max)
        return STREAM_ZSTD_STREAMED;
    *raw = size;
    return STREAM_ZSTD_WHOLE;
}

/* Copy n bytes of the frame into dst at *len, within cap. */
static int copy_part(struct stream_decoder *d, unsigned char *dst, size_t cap, size_t *len,
                     size_t n, struct weir_error *err)
{
    if (n > cap - *len)
        return error_set(err, WEIR_EXIT_INTEGRITY, "%s: corrupt zstd data near byte %llu: a "
                         "frame larger than its content size allows", d->src.name,
                         (unsigned long long)d->offset);
    if (stream_payload(d, dst + *len, n, err))
        return -1;
    *len += n;
    return 0;
}

int stream_zstd_frame(struct stream_decoder *d, void *dst, size_t cap, size_t *len,
                      struct weir_error *err)
{
    bool sum;
    size_t head_len = frame_header(d->stage + d->pos, d->end - d->pos, &sum);
    *len = 0;
    if (head_len == 0 || copy_part(d, dst, cap, len, head_len, err))
        return head_len == 0 ? refused(d, (size_t)-ZSTD_error_prefix_unknown, err) : -1;
    for (bool last = false; !last;) {
        int r = stream_need(d, 3, err);
        if (r <= 0)
            return r < 0 ? -1 : error_set(err, WEIR_EXIT_INTEGRITY, "%s: truncated zstd data "
                                          "at byte %llu (inside a frame)", d->src.name,
                                          (unsigned long long)(d->offset + (d->end - d->pos)));
        const unsigned char *p = d->stage + d->pos;
        uint32_t head = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
        unsigned type = (head >> 1) & 3;
        last = head & 1;
        if (type == 3)   /* reserved */
            return refused(d, (size_t)-ZSTD_error_corruption_detected, err);
        if (copy_part(d, dst, cap, len, 3 + (type == 1 ? 1 : head >> 3), err))
            return -1;
    }
    return sum ? copy_part(d, dst, cap, len, 4, err) : 0;
}
