/* decode.c - see decode.h. */
#include "format/decode.h"

#include "format/codec.h"

static int step_of(int rc)
{
    return rc < 0 ? STEP_FAIL : rc;
}

static int decode_weir(struct stream_decoder *d, const struct decode_sink *s,
                       struct weir_error *err)
{
    /* a zstd frame of an incompressible block is a little larger than it */
    int rc = s->start(s->ctx, d->zstd ? CODEC_ZSTD_BOUND(d->block_max) : d->block_max, err);
    while (rc == STEP_OK) {
        struct stream_block b;
        int r = stream_next(d, &b, err);
        if (r <= 0)
            return r == 0 ? STEP_OK : STEP_FAIL;
        rc = b.hole ? s->hole(s->ctx, b.hole_len, err) : s->block(s->ctx, d, &b, err);
    }
    return rc;
}

static int decode_lz4(struct stream_decoder *d, const struct decode_sink *s,
                      struct weir_error *err)
{
    bool started = false;
    for (;;) {
        struct stream_block b;
        int r = stream_lz4_next(d, &b, err), rc;
        if (r == 0)
            return STEP_OK;
        if ((r == STREAM_LZ4_FRAME || r == STREAM_LZ4_LINKED || r == STREAM_LZ4_LEGACY) &&
            !started) {
            /* a legacy block's compressed payload may exceed its raw size */
            started = true;
            rc = s->start(s->ctx, d->frame.legacy ? CODEC_LEGACY_WIRE_MAX : d->frame.block_max,
                          err);
            if (rc != STEP_OK)
                return rc;
        }
        switch (r) {
        case STREAM_LZ4_FRAME:
            rc = s->frame_start(s->ctx, d, err);
            break;
        case STREAM_LZ4_BLOCK:
            rc = s->block(s->ctx, d, &b, err);
            break;
        case STREAM_LZ4_FRAME_END:
            rc = s->frame_end(s->ctx, d, err);
            break;
        case STREAM_LZ4_LINKED:
            rc = s->linked(s->ctx, d, err);
            break;
        case STREAM_LZ4_LEGACY:
            rc = s->legacy(s->ctx, d, err);
            break;
        default:
            rc = step_of(r);
        }
        if (rc != STEP_OK)
            return rc;
    }
}

/* Plain zstd data, frame by frame: one that declares a content size of at
 * most CODEC_BLOCK_MAX goes whole to the sink's zstd_frame (the engine's
 * workers decode such frames in parallel, as pzstd and seekable files have
 * them); any other (no size, larger, skippable) is decoded in order by
 * the sink's linked, which returns at its end.  The blocks hold such a
 * frame's content or the most it may take on the wire. */
static int decode_zstd(struct stream_decoder *d, const struct decode_sink *s,
                       struct weir_error *err)
{
    int rc = s->start(s->ctx, CODEC_ZSTD_BOUND(CODEC_BLOCK_MAX), err);
    while (rc == STEP_OK) {
        uint64_t raw;
        int r = stream_zstd_whole(d, CODEC_BLOCK_MAX, &raw, err);
        if (r < 0)
            return STEP_FAIL;
        if (r == STREAM_ZSTD_END)
            return STEP_OK;
        rc = r == STREAM_ZSTD_WHOLE ? s->zstd_frame(s->ctx, d, raw, err)
                                    : s->linked(s->ctx, d, err);
    }
    return rc;
}

int decode_stream(struct stream_decoder *d, const struct decode_sink *s,
                  struct weir_error *err)
{
    if (d->kind == STREAM_ZSTD)
        return decode_zstd(d, s, err);
    return d->kind == STREAM_WEIR ? decode_weir(d, s, err) : decode_lz4(d, s, err);
}
