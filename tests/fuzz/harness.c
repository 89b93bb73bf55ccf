/* harness.c - see harness.h. */
#include "harness.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "format/codec.h"
#include "format/decode.h"
#include "format/sparse.h"
#include "format/stream.h"

struct memsrc {
    const uint8_t *data;
    size_t size, pos, chunk;
};

static ssize_t mem_read(void *ctx, void *buf, size_t n)
{
    struct memsrc *m = ctx;
    size_t left = m->size - m->pos;
    if (n > left)
        n = left;
    if (n > m->chunk)
        n = m->chunk;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (ssize_t)n;
}

struct outbuf {
    uint8_t *p;
    size_t len, cap;
};

static int out_reserve(struct outbuf *o, size_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    if (more > HARNESS_OUT_MAX || o->len + more > HARNESS_OUT_MAX)
        return -1;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + more)
        cap *= 2;
    uint8_t *p = realloc(o->p, cap);
    if (!p)
        return -1;
    o->p = p;
    o->cap = cap;
    return 0;
}

/* The decoder's sink (decode.h), decoding and verifying each block inline
 * where the engine hands it to its workers. */
struct memsink {
    struct outbuf out, payload;
    struct stream_content content;
    void *zstd;                /* a zstd stream's decoding context */
};

static int sink_start(void *ctx, size_t block, struct weir_error *err)
{
    (void)ctx, (void)block, (void)err;
    return STEP_OK;
}

static int sink_block(void *ctx, struct stream_decoder *d, struct stream_block *b,
                      struct weir_error *err)
{
    struct memsink *m = ctx;
    m->payload.len = 0;
    if (out_reserve(&m->payload, b->wire_len))
        return error_set(err, WEIR_EXIT_INTERNAL, "harness: out of memory"), STEP_FAIL;
    if (stream_payload(d, m->payload.p, b->wire_len, err) || stream_block_end(d, b, err))
        return STEP_FAIL;
    /* a weir block's record gives its length, an LZ4 block only a maximum:
     * a block that decodes to more is corrupt */
    size_t cap = b->lz4 ? b->raw_max : b->raw_len;
    if (out_reserve(&m->out, cap))
        return error_set(err, WEIR_EXIT_INTERNAL, "harness: out of memory"), STEP_FAIL;
    unsigned char *dst = m->out.p + m->out.len;
    long n = stream_decode_block(b, &m->zstd, m->payload.p, dst, cap);
    if (stream_verify_block(b, m->payload.p, dst, n, "harness", err))
        return STEP_FAIL;
    if (b->lz4 && !b->legacy)
        stream_content_add(&m->content, dst, (size_t)n);
    m->out.len += (size_t)n;
    return STEP_OK;
}

static int sink_frame_start(void *ctx, struct stream_decoder *d, struct weir_error *err)
{
    struct memsink *m = ctx;
    (void)err;
    stream_content_begin(&m->content, &d->frame);
    return STEP_OK;
}

static int sink_frame_end(void *ctx, struct stream_decoder *d, struct weir_error *err)
{
    struct memsink *m = ctx;
    return stream_content_end(&m->content, &d->frame, "harness", err) ? STEP_FAIL : STEP_OK;
}

static int sink_linked(void *ctx, struct stream_decoder *d, struct weir_error *err)
{
    struct memsink *m = ctx;
    bool zstd = d->kind == STREAM_ZSTD;
    for (bool more = zstd || d->lz4_linked; more;) {
        size_t n;
        if (out_reserve(&m->out, 65536))
            return error_set(err, WEIR_EXIT_INTERNAL, "harness: out of memory"), STEP_FAIL;
        unsigned char *dst = m->out.p + m->out.len;
        if (zstd ? stream_zstd_read(d, dst, 65536, &n, err)
                 : stream_lz4_read(d, dst, 65536, &n, err))
            return STEP_FAIL;
        m->out.len += n;
        more = zstd ? n > 0 && d->zstd_in_frame : d->lz4_linked;
    }
    return STEP_OK;
}

static int sink_zstd_frame(void *ctx, struct stream_decoder *d, uint64_t raw,
                           struct weir_error *err)
{
    struct memsink *m = ctx;
    size_t cap = CODEC_ZSTD_BOUND(CODEC_BLOCK_MAX), len;
    m->payload.len = 0;
    if (out_reserve(&m->payload, cap) || out_reserve(&m->out, (size_t)raw))
        return error_set(err, WEIR_EXIT_INTERNAL, "harness: out of memory"), STEP_FAIL;
    if (stream_zstd_frame(d, m->payload.p, cap, &len, err))
        return STEP_FAIL;
    struct stream_block b = {.zstd = true, .plain = true, .unsummed = true,
                             .raw_len = (uint32_t)raw,
                             .seq = d->seq++, .wire_len = (uint32_t)len};
    unsigned char *dst = m->out.p + m->out.len;
    long n = stream_decode_block(&b, &m->zstd, m->payload.p, dst, (size_t)raw);
    if (stream_verify_block(&b, m->payload.p, dst, n, "harness", err))
        return STEP_FAIL;
    m->out.len += (size_t)n;
    return STEP_OK;
}

static int sink_legacy(void *ctx, struct stream_decoder *d, struct weir_error *err)
{
    (void)ctx, (void)d, (void)err;
    return STEP_OK;
}

static int sink_hole(void *ctx, uint64_t len, struct weir_error *err)
{
    struct memsink *m = ctx;
    if (len > HARNESS_OUT_MAX || out_reserve(&m->out, (size_t)len))
        return error_set(err, WEIR_EXIT_INTERNAL, "harness: a hole of %llu bytes is more "
                         "than it holds", (unsigned long long)len), STEP_FAIL;
    memset(m->out.p + m->out.len, 0, (size_t)len);
    m->out.len += (size_t)len;
    return STEP_OK;
}

int harness_decode(const uint8_t *data, size_t size, size_t chunk, uint8_t **out,
                   size_t *outlen, struct weir_error *err)
{
    return harness_decode_from(data, size, chunk, false, out, outlen, err);
}

int harness_decode_from(const uint8_t *data, size_t size, size_t chunk, bool sealed,
                        uint8_t **out, size_t *outlen, struct weir_error *err)
{
    struct memsrc src_state = {.data = data, .size = size, .chunk = chunk ? chunk : 1};
    struct stream_source src = {.read = mem_read, .ctx = &src_state,
                                .error_status = WEIR_EXIT_INPUT, .name = "input",
                                .sealed = sealed, .window_max = 8u << 20};
    struct stream_decoder d;
    struct memsink m = {0};
    struct decode_sink sink = {.ctx = &m, .start = sink_start, .block = sink_block,
                               .frame_start = sink_frame_start, .frame_end = sink_frame_end,
                               .linked = sink_linked, .zstd_frame = sink_zstd_frame,
                               .legacy = sink_legacy, .hole = sink_hole};
    int rc = stream_init(&d, &src, err) ? STEP_FAIL : STEP_OK;
    if (rc == STEP_OK && stream_sniff(&d, true, false, err))
        rc = STEP_FAIL;
    if (rc == STEP_OK)
        rc = decode_stream(&d, &sink, err);
    stream_free(&d);
    free(m.payload.p);
    codec_zstd_free(NULL, &m.zstd);
    if (rc != STEP_OK) {
        free(m.out.p);
        return -1;
    }
    *out = m.out.p;
    *outlen = m.out.len;
    return 0;
}

/* Both forms from the same pieces, written span by span as the engine's
 * writers write them (codec.h). */
static uint8_t *encode_form(const uint8_t *data, size_t size, size_t block, int level,
                            enum codec_form form, bool sized, size_t *len)
{
    uint64_t npieces = size ? codec_pieces(size, (uint32_t)block) : 0;
    size_t plen = size + npieces * CODEC_PIECE_OVERHEAD + CODEC_END_SIZE;
    uint8_t *pieces = malloc(plen);
    uint8_t *buf = malloc(plen + CODEC_HEADER_SIZE + CODEC_LZ4_HEADER_MAX);
    if (!pieces || !buf) {
        free(pieces);
        free(buf);
        return NULL;
    }
    plen = size ? codec_encode(data, size, pieces, level, 0, (uint32_t)block,
                               CODEC_SUMS_WEIR | CODEC_SUMS_FRAME)
                : 0;
    size_t pos;
    uint64_t chain = 0;
    if (form == CODEC_FORM_WEIR) {
        pos = codec_header(buf, (uint32_t)block, level ? CODEC_HEADER_COMPRESSED : 0,
                           CODEC_VERSION_OLDEST);
        chain = codec_chain_start(buf);
    } else {
        pos = codec_lz4_header(buf, (uint32_t)block, sized, size);
    }
    for (size_t off = 0; off <= plen;) {
        if (off == plen) {
            /* the end, with the chain of the pieces before it */
            codec_end(pieces + plen, size, npieces, chain, XXH32(data, size, 0));
        } else {
            uint32_t raw;
            uint64_t hash;
            codec_piece_record(pieces + off, &raw, &hash);
            chain = codec_chain(chain, hash, raw);
        }
        struct codec_span sp[2];
        size_t total;
        int k = codec_spans(pieces + off, form, sp, &total);
        for (int i = 0; i < k; i++) {
            memcpy(buf + pos, pieces + off + sp[i].off, sp[i].len);
            pos += sp[i].len;
        }
        off += total;
    }
    free(pieces);
    *len = pos;
    return buf;
}

uint8_t *harness_encode(const uint8_t *data, size_t size, size_t block, int level,
                        size_t *len)
{
    return encode_form(data, size, block, level, CODEC_FORM_WEIR, false, len);
}

uint8_t *harness_encode_lz4(const uint8_t *data, size_t size, size_t block, int level,
                            bool sized, size_t *len)
{
    return encode_form(data, size, block, level, CODEC_FORM_FRAME, sized, len);
}

static int append(struct outbuf *o, const void *p, size_t n)
{
    if (out_reserve(o, n))
        return -1;
    memcpy(o->p + o->len, p, n);
    o->len += n;
    return 0;
}

uint8_t *harness_encode_sparse(const uint8_t *data, size_t size, size_t block, int level,
                               size_t *len)
{
    struct outbuf o = {0};
    unsigned char rec[CODEC_HEADER_SIZE + CODEC_TRAILER_SIZE + CODEC_HOLE_SIZE];
    codec_header(rec, (uint32_t)block, level ? CODEC_HEADER_COMPRESSED : 0, CODEC_VERSION);
    uint64_t chain = codec_chain_start(rec), seq = 0;
    int rc = append(&o, rec, CODEC_HEADER_SIZE);
    for (size_t pos = 0; rc == 0 && pos < size;) {
        bool zero;
        size_t run = sparse_run(data + pos, size - pos, pos, true, &zero);
        if (zero) {
            codec_hole(rec, seq++, run);
            chain = codec_chain_hole(chain, codec_get64(rec + CODEC_HOLE_SIZE - 8), run);
            rc = append(&o, rec, CODEC_HOLE_SIZE);
            pos += run;
            continue;
        }
        uint64_t n = codec_pieces(run, (uint32_t)block);
        uint8_t *pieces = malloc(run + n * CODEC_PIECE_OVERHEAD);
        if (!pieces)
            break;
        size_t plen = codec_encode(data + pos, run, pieces, level, seq, (uint32_t)block,
                                   CODEC_SUMS_WEIR);
        for (size_t off = 0; rc == 0 && off < plen;) {
            uint32_t raw;
            uint64_t hash;
            codec_piece_record(pieces + off, &raw, &hash);
            chain = codec_chain(chain, hash, raw);
            struct codec_span sp[2];
            size_t total;
            codec_spans(pieces + off, CODEC_FORM_WEIR, sp, &total);
            rc = append(&o, pieces + off + sp[0].off, sp[0].len);
            off += total;
        }
        free(pieces);
        seq += n;
        pos += run;
    }
    codec_trailer(rec, size, seq, chain);
    if (rc == 0)
        rc = append(&o, rec, CODEC_TRAILER_SIZE);
    if (rc != 0) {
        free(o.p);
        return NULL;
    }
    *len = o.len;
    return o.p;
}
