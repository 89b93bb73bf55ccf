/* harness.c - see harness.h. */
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "weir/codec.h"
#include "weir/stream.h"

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

static int decode_weir(struct stream_decoder *d, struct outbuf *o, struct weir_error *err)
{
    struct outbuf payload = {0};
    int rc = -1;
    for (;;) {
        struct stream_block b;
        int r = stream_next(d, &b, err);
        if (r == 0) {
            rc = 0;
            break;
        }
        payload.len = 0;
        if (r < 0 || out_reserve(&payload, b.wire_len) ||
            stream_payload(d, payload.p, b.wire_len, err) || stream_block_end(d, &b, err) ||
            out_reserve(o, b.raw_len))
            break;
        /* the record's length is the capacity: a block that decodes to more is corrupt */
        long n = codec_decode_block(payload.p, b.wire_len, b.stored, o->p + o->len, b.raw_len);
        if (stream_verify_block(&b, payload.p, o->p + o->len, n, "harness", err))
            break;
        o->len += (size_t)n;
    }
    free(payload.p);
    return rc;
}

static int decode_linked(struct stream_decoder *d, struct outbuf *o, struct weir_error *err)
{
    while (d->lz4_linked) {
        size_t n;
        if (out_reserve(o, 65536) || stream_lz4_read(d, o->p + o->len, 65536, &n, err))
            return -1;
        o->len += n;
    }
    return 0;
}

static int decode_lz4(struct stream_decoder *d, struct outbuf *o, struct weir_error *err)
{
    struct outbuf payload = {0};
    struct stream_content content;
    int rc = -1;
    for (;;) {
        struct stream_block b;
        int r = stream_lz4_next(d, &b, err);
        if (r == 0)
            rc = 0;
        if (r <= 0)
            break;
        if (r == STREAM_LZ4_FRAME) {
            stream_content_begin(&content, &d->frame);
        } else if (r == STREAM_LZ4_FRAME_END) {
            if (stream_content_end(&content, &d->frame, "harness", err))
                break;
        } else if (r == STREAM_LZ4_LINKED) {
            if (decode_linked(d, o, err))
                break;
        } else {
            payload.len = 0;
            if (out_reserve(&payload, b.wire_len) ||
                stream_payload(d, payload.p, b.wire_len, err) ||
                stream_block_end(d, &b, err) || out_reserve(o, b.raw_max))
                break;
            long n = codec_decode_block(payload.p, b.wire_len, b.stored, o->p + o->len,
                                        b.raw_max);
            if (stream_verify_block(&b, payload.p, o->p + o->len, n, "harness", err))
                break;
            stream_content_add(&content, o->p + o->len, (size_t)n);
            o->len += (size_t)n;
        }
    }
    free(payload.p);
    return rc;
}

int harness_decode(const uint8_t *data, size_t size, size_t chunk, uint8_t **out,
                   size_t *outlen, struct weir_error *err)
{
    struct memsrc m = {.data = data, .size = size, .chunk = chunk ? chunk : 1};
    struct stream_source src = {.read = mem_read, .ctx = &m,
                                .error_status = WEIR_EXIT_INPUT, .name = "input"};
    struct stream_decoder d;
    struct outbuf o = {0};
    int rc = stream_init(&d, &src, err);
    if (rc == 0)
        rc = stream_sniff(&d, true, false, err);
    if (rc == 0)
        rc = d.kind == STREAM_WEIR ? decode_weir(&d, &o, err) : decode_lz4(&d, &o, err);
    stream_free(&d);
    if (rc != 0) {
        free(o.p);
        return -1;
    }
    *out = o.p;
    *outlen = o.len;
    return 0;
}

uint8_t *harness_encode(const uint8_t *data, size_t size, size_t block, int level,
                        size_t *len)
{
    size_t nblocks = size / block + 1;
    uint8_t *buf = malloc(CODEC_HEADER_SIZE + size + nblocks * CODEC_BLOCK_OVERHEAD +
                          CODEC_TRAILER_SIZE);
    if (!buf)
        return NULL;
    size_t pos = codec_header(buf, (uint32_t)block, level ? CODEC_HEADER_COMPRESSED : 0);
    uint64_t chain = codec_chain_start(buf), seq = 0;
    for (size_t off = 0; off < size; off += block, seq++) {
        size_t n = size - off < block ? size - off : block;
        uint64_t hash;
        pos += codec_encode_block(data + off, n, buf + pos, level, seq, (uint32_t)block, &hash);
        chain = codec_chain(chain, hash, (uint32_t)n);
    }
    pos += codec_trailer(buf + pos, size, seq, chain);
    *len = pos;
    return buf;
}
