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
        if (out.pos > 0) {
            *n = out.pos;
            return 0;
        }
    }
}
