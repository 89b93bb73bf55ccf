/* codec.c - see codec.h and doc/stream-format.md. */
#include "format/codec.h"

#include <lz4.h>
#include <lz4hc.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

unsigned codec_bd_code(uint32_t block_max)
{
    if (block_max <= (64u << 10))
        return 4;
    if (block_max <= (256u << 10))
        return 5;
    if (block_max <= (1u << 20))
        return 6;
    return 7;
}

uint32_t codec_bd_size(unsigned code)
{
    return code >= 4 && code <= 7 ? 1u << (8 + 2 * code) : 0;
}

static size_t record_start(unsigned char *dst, uint32_t payload, unsigned char type)
{
    codec_put32(dst, CODEC_WEIR_MAGIC);
    codec_put32(dst + 4, payload);
    memset(dst + 8, 0, payload);
    dst[8] = type;
    return 8;
}

size_t codec_header(unsigned char *dst, uint32_t block_max, unsigned flags, unsigned version)
{
    record_start(dst, 16, 'H');
    memcpy(dst + 9, "WEIR", 4);
    dst[13] = (unsigned char)version;
    dst[14] = (unsigned char)flags;
    codec_put32(dst + 16, block_max);
    return CODEC_HEADER_SIZE;
}

size_t codec_frame_prefix(unsigned char *dst, uint32_t block_max, uint32_t wire_len,
                          bool stored)
{
    codec_put32(dst, CODEC_LZ4_MAGIC);
    dst[4] = 0x60;   /* version 01, independent blocks, no checksums, no size */
    dst[5] = (unsigned char)(codec_bd_code(block_max) << 4);
    dst[6] = (unsigned char)((XXH32(dst + 4, 2, 0) >> 8) & 0xFF);
    codec_put32(dst + 7, wire_len | (stored ? 0x80000000u : 0));
    return CODEC_FRAME_PREFIX;
}

size_t codec_block_record(unsigned char *dst, uint64_t seq, uint32_t raw_len, uint64_t hash)
{
    record_start(dst, 24, 'B');
    codec_put32(dst + 12, raw_len);
    codec_put64(dst + 16, seq);
    codec_put64(dst + 24, hash);
    return CODEC_RECORD_B;
}

size_t codec_announce(unsigned char *dst, unsigned char type, uint32_t wire_len)
{
    record_start(dst, 16, type);
    codec_put32(dst + 12, wire_len);
    return CODEC_ANNOUNCE_SIZE;
}

size_t codec_frame_suffix(unsigned char *dst, uint64_t seq, uint32_t raw_len, uint64_t hash)
{
    codec_put32(dst, 0);   /* EndMark */
    codec_block_record(dst + 4, seq, raw_len, hash);
    return CODEC_FRAME_SUFFIX;
}

size_t codec_trailer(unsigned char *dst, uint64_t total, uint64_t nblocks, uint64_t chain)
{
    record_start(dst, 32, 'T');
    codec_put64(dst + 16, total);
    codec_put64(dst + 24, nblocks);
    codec_put64(dst + 32, chain);
    return CODEC_TRAILER_SIZE;
}

/* The checksum that ends a control record (or a hole) of total bytes. */
static size_t record_seal(unsigned char *dst, size_t total)
{
    codec_put64(dst + total - CODEC_SUM_SIZE, XXH3_64bits(dst, total - CODEC_SUM_SIZE));
    return total;
}

size_t codec_hole(unsigned char *dst, uint64_t seq, uint64_t len)
{
    record_start(dst, CODEC_HOLE_SIZE - 8, 'Z');
    codec_put64(dst + 16, len);
    codec_put64(dst + 24, seq);
    return record_seal(dst, CODEC_HOLE_SIZE);
}

static size_t message_record(unsigned char *dst, unsigned char type, int code,
                             uint64_t bytes, uint64_t chain, const char *msg)
{
    size_t len = msg ? strlen(msg) : 0;
    if (len > CODEC_STATUS_MAX)
        len = CODEC_STATUS_MAX;
    record_start(dst, (uint32_t)(CODEC_STATUS_FIXED - 8 + len + CODEC_SUM_SIZE), type);
    dst[9] = (unsigned char)code;
    codec_put32(dst + 12, (uint32_t)len);
    codec_put64(dst + 16, bytes);
    codec_put64(dst + 24, chain);
    if (len)
        memcpy(dst + CODEC_STATUS_FIXED, msg, len);
    return record_seal(dst, CODEC_STATUS_FIXED + len + CODEC_SUM_SIZE);
}

size_t codec_status(unsigned char *dst, int code, uint64_t bytes, uint64_t chain,
                    const char *msg)
{
    return message_record(dst, 'S', code, bytes, chain, msg);
}

size_t codec_abort(unsigned char *dst, int code, const char *msg)
{
    return message_record(dst, 'A', code, 0, 0, msg);
}

size_t codec_greeting(unsigned char *dst, enum codec_role role, uint32_t features)
{
    return codec_greeting_routed(dst, role, features, 0);
}

size_t codec_greeting_routed(unsigned char *dst, enum codec_role role, uint32_t features,
                             uint32_t route)
{
    record_start(dst, CODEC_GREETING_SIZE - 8, 'G');
    codec_put32(dst + 20, route);
    memcpy(dst + 9, "WEIR", 4);
    dst[13] = CODEC_PROTOCOL;
    dst[14] = CODEC_PROTOCOL_OLDEST;
    dst[15] = (unsigned char)role;
    codec_put32(dst + 16, features);
    return record_seal(dst, CODEC_GREETING_SIZE);
}

size_t codec_keepalive(unsigned char *dst, uint64_t bytes, unsigned phase)
{
    record_start(dst, CODEC_KEEPALIVE_SIZE - 8, 'K');
    dst[9] = (unsigned char)phase;
    codec_put64(dst + 16, bytes);
    return record_seal(dst, CODEC_KEEPALIVE_SIZE);
}

size_t codec_join(unsigned char *dst, const unsigned char token[CODEC_TOKEN_SIZE],
                  unsigned index, unsigned count)
{
    record_start(dst, CODEC_SESSION_SIZE - 8, 'J');
    dst[9] = (unsigned char)index;
    dst[10] = (unsigned char)count;
    memcpy(dst + 16, token, CODEC_TOKEN_SIZE);
    return record_seal(dst, CODEC_SESSION_SIZE);
}

/* A chunk's header: "WCHK", its length, its number. */
void codec_chunk(unsigned char *dst, uint64_t seq, uint32_t len)
{
    memcpy(dst, "WCHK", 4);
    codec_put32(dst + 4, len);
    codec_put64(dst + 8, seq);
}

int codec_parse_chunk(const unsigned char *p, uint64_t *seq, uint32_t *len)
{
    uint32_t n = codec_get32(p + 4);
    if (memcmp(p, "WCHK", 4) != 0 || n == 0 || n > CODEC_CHUNK_MAX)
        return -1;
    *len = n;
    *seq = codec_get64(p + 8);
    return 0;
}

size_t codec_session(unsigned char *dst, unsigned char type,
                     const unsigned char token[CODEC_TOKEN_SIZE])
{
    return codec_session_routed(dst, type, token, 0);
}

size_t codec_session_routed(unsigned char *dst, unsigned char type,
                            const unsigned char token[CODEC_TOKEN_SIZE], uint32_t route)
{
    record_start(dst, CODEC_SESSION_SIZE - 8, type);
    if (type == 'N')
        codec_put32(dst + 12, route);
    memcpy(dst + 16, token, CODEC_TOKEN_SIZE);
    return record_seal(dst, CODEC_SESSION_SIZE);
}

size_t codec_confirm(unsigned char *dst, uint64_t bytes)
{
    record_start(dst, CODEC_SESSION_SIZE - 8, 'C');
    codec_put64(dst + 16, bytes);
    return record_seal(dst, CODEC_SESSION_SIZE);
}

size_t codec_done(unsigned char *dst, uint64_t bytes, uint64_t chain)
{
    record_start(dst, CODEC_SESSION_SIZE - 8, 'D');
    codec_put64(dst + 16, bytes);
    codec_put64(dst + 24, chain);
    return record_seal(dst, CODEC_SESSION_SIZE);
}

bool codec_target_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n <= CODEC_TARGET_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyz"
                                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

size_t codec_place(unsigned char *dst, const char *target)
{
    size_t n = strlen(target);
    record_start(dst, CODEC_PLACE_SIZE - 8, 'P');
    dst[9] = (unsigned char)n;
    memcpy(dst + 16, target, n);
    return record_seal(dst, CODEC_PLACE_SIZE);
}

size_t codec_link(unsigned char *dst, const struct codec_link *l)
{
    record_start(dst, CODEC_LINK_SIZE - 8, 'L');
    dst[9] = l->op;
    dst[10] = l->dir;
    codec_put32(dst + 12, l->n);
    codec_put64(dst + 16, l->a);
    codec_put64(dst + 24, l->b);
    codec_put64(dst + 32, l->c);
    memcpy(dst + 40, l->token, CODEC_TOKEN_SIZE);
    return record_seal(dst, CODEC_LINK_SIZE);
}

size_t codec_record_length(const unsigned char *p)
{
    uint32_t len = codec_get32(p + 4);
    if (codec_get32(p) != CODEC_WEIR_MAGIC || len < 16 || len > CODEC_PAYLOAD_MAX)
        return 0;
    return 8 + (size_t)len;
}

static bool zeros(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static int bad_record(char *why, size_t whylen, const char *what)
{
    snprintf(why, whylen, "%s", what);
    return -1;
}

static int parse_header_record(const unsigned char *p, size_t len, struct codec_record *r,
                               char *why, size_t whylen)
{
    if (len != CODEC_HEADER_SIZE || memcmp(p + 9, "WEIR", 4) != 0)
        return bad_record(why, whylen, "malformed weir header");
    r->version = p[13];
    if (r->version < CODEC_VERSION_OLDEST || r->version > CODEC_VERSION) {
        snprintf(why, whylen, "unsupported weir stream version %u (this weir reads %u to %u)",
                 r->version, CODEC_VERSION_OLDEST, CODEC_VERSION);
        return -1;
    }
    r->flags = p[14];
    r->block_max = codec_get32(p + 16);
    if ((r->flags & ~(CODEC_HEADER_COMPRESSED | CODEC_HEADER_SEALED | CODEC_HEADER_ZSTD)) ||
        p[15] ||
        !zeros(p + 20, 4))
        return bad_record(why, whylen, "malformed weir header (reserved bits set)");
    if (((r->flags & CODEC_HEADER_COMPRESSED) && (r->flags & CODEC_HEADER_SEALED)) ||
        ((r->flags & CODEC_HEADER_ZSTD) && !(r->flags & CODEC_HEADER_COMPRESSED)))
        return bad_record(why, whylen, "malformed weir header (flags)");
    if (r->block_max == 0 || r->block_max > CODEC_BLOCK_MAX)
        return bad_record(why, whylen, "malformed weir header (block size)");
    return 0;
}

static int parse_message_record(const unsigned char *p, size_t len, struct codec_record *r,
                                char *why, size_t whylen)
{
    uint32_t mlen = codec_get32(p + 12);
    if (len < CODEC_STATUS_FIXED + CODEC_SUM_SIZE || p[10] || p[11] ||
        mlen != len - CODEC_STATUS_FIXED - CODEC_SUM_SIZE ||
        (r->type == 'A' && (codec_get64(p + 16) != 0 || codec_get64(p + 24) != 0)))
        return bad_record(why, whylen, "malformed weir status record");
    r->code = p[9];
    r->bytes = codec_get64(p + 16);
    r->chain = codec_get64(p + 24);
    memcpy(r->msg, p + CODEC_STATUS_FIXED, mlen);
    r->msg[mlen] = '\0';
    /* a message is one line of text: anything else is shown escaped */
    for (uint32_t i = 0; i < mlen; i++)
        if ((unsigned char)r->msg[i] < 0x20 || r->msg[i] == 0x7f)
            r->msg[i] = '?';
    return 0;
}

/* Which direction byte an op may carry. */
static bool link_dir_valid(unsigned char op, unsigned char dir)
{
    if (op == CODEC_LINK_RUN)
        return dir == CODEC_LINK_OUT || dir == CODEC_LINK_IN || dir == CODEC_LINK_BOTH;
    if (op == CODEC_LINK_JOIN)
        return dir == CODEC_LINK_OUT || dir == CODEC_LINK_IN;
    return dir == 0;
}

static int parse_link_record(const unsigned char *p, size_t len, struct codec_record *r,
                             char *why, size_t whylen)
{
    struct codec_link *l = &r->link;
    if (len != CODEC_LINK_SIZE || !strchr("HWJRUNMPQE", p[9]) || !p[9] || p[11] ||
        !link_dir_valid(p[9], p[10]))
        return bad_record(why, whylen, "malformed weir link-test record");
    l->op = p[9];
    l->dir = p[10];
    l->n = codec_get32(p + 12);
    l->a = codec_get64(p + 16);
    l->b = codec_get64(p + 24);
    l->c = codec_get64(p + 32);
    memcpy(l->token, p + 40, CODEC_TOKEN_SIZE);
    return 0;
}

/* A greeting: the magic, the versions this weir speaks, its role and its
 * features. */
static int parse_greeting_record(const unsigned char *p, size_t len, struct codec_record *r,
                                 char *why, size_t whylen)
{
    if (len != CODEC_GREETING_SIZE || memcmp(p + 9, "WEIR", 4) != 0 ||
        (p[15] != CODEC_ROLE_SENDER && !zeros(p + 20, 4)) ||
        (p[15] != CODEC_ROLE_RECEIVER && p[15] != CODEC_ROLE_SENDER &&
         p[15] != CODEC_ROLE_TESTER) ||
        p[14] == 0 || p[14] > p[13])
        return bad_record(why, whylen, "malformed weir greeting");
    r->version = p[13];
    r->oldest = p[14];
    r->role = p[15];
    r->features = codec_get32(p + 16);
    r->route = codec_get32(p + 20);
    return 0;
}

/* 'J': which connection of how many (1 <= index < count <= 16), the token. */
static int parse_join_record(const unsigned char *p, size_t len, struct codec_record *r,
                             char *why, size_t whylen)
{
    if (len != CODEC_SESSION_SIZE || p[9] == 0 || p[10] < 2 || p[10] > CODEC_STREAMS_MAX ||
        p[9] >= p[10] || !zeros(p + 11, 5))
        return bad_record(why, whylen, "malformed weir join record");
    r->join_index = p[9];
    r->join_count = p[10];
    memcpy(r->token, p + 16, CODEC_TOKEN_SIZE);
    return 0;
}

/* 'P': a name of the allowed characters, its length in byte 9 and zeros
 * after it, so that one name has one encoding. */
static int parse_place_record(const unsigned char *p, size_t len, struct codec_record *r,
                              char *why, size_t whylen)
{
    size_t n = len == CODEC_PLACE_SIZE ? p[9] : 0;
    if (len != CODEC_PLACE_SIZE || n > CODEC_TARGET_MAX || !zeros(p + 10, 6) ||
        !zeros(p + 16 + n, 64 - n))
        return bad_record(why, whylen, "malformed weir target record");
    memcpy(r->target, p + 16, n);
    r->target[n] = 0;
    if (strlen(r->target) != n || !codec_target_name_ok(r->target))
        return bad_record(why, whylen, "malformed weir target record");
    return 0;
}

int codec_parse_record(const unsigned char *p, size_t len, struct codec_record *r, char *why,
                       size_t whylen)
{
    memset(r, 0, sizeof *r);
    if (len < 24 || codec_record_length(p) != len)
        return bad_record(why, whylen, "malformed weir record (bad length)");
    r->type = p[8];
    if (strchr("GKSAZLNCRPJD", r->type) && r->type &&
        codec_get64(p + len - CODEC_SUM_SIZE) != XXH3_64bits(p, len - CODEC_SUM_SIZE))
        return bad_record(why, whylen, "corrupt weir record (checksum mismatch)");
    switch (r->type) {
    case 'H':
        return parse_header_record(p, len, r, why, whylen);
    case 'S':
    case 'A':
        return parse_message_record(p, len, r, why, whylen);
    case 'G':
        return parse_greeting_record(p, len, r, why, whylen);
    case 'K':
        if (len != CODEC_KEEPALIVE_SIZE || p[9] > CODEC_PHASE_MAX || !zeros(p + 10, 6))
            return bad_record(why, whylen, "malformed weir keepalive");
        r->phase = p[9];
        r->bytes = codec_get64(p + 16);
        return 0;
    case 'Z':
        r->bytes = codec_get64(p + 16);
        if (len != CODEC_HOLE_SIZE || !zeros(p + 9, 7) || r->bytes == 0 ||
            r->bytes > CODEC_TOTAL_MAX)
            return bad_record(why, whylen, "malformed weir hole record");
        r->seq = codec_get64(p + 24);
        r->sum = codec_get64(p + 32);
        return 0;
    case 'L':
        return parse_link_record(p, len, r, why, whylen);
    case 'J':
        return parse_join_record(p, len, r, why, whylen);
    case 'N':
    case 'R':
    case 'C':
        if (len != CODEC_SESSION_SIZE || !zeros(p + 9, r->type == 'N' ? 3 : 7) ||
            (r->type == 'C' && !zeros(p + 24, 8)))
            return bad_record(why, whylen, "malformed weir session record");
        r->route = r->type == 'N' ? codec_get32(p + 12) : 0;
        if (r->type == 'C')
            r->bytes = codec_get64(p + 16);
        else
            memcpy(r->token, p + 16, CODEC_TOKEN_SIZE);
        return 0;
    case 'P':
        return parse_place_record(p, len, r, why, whylen);
    case 'D':
        if (len != CODEC_SESSION_SIZE || !zeros(p + 9, 7))
            return bad_record(why, whylen, "malformed weir session record");
        r->bytes = codec_get64(p + 16);
        r->chain = codec_get64(p + 24);
        return 0;
    default:
        return bad_record(why, whylen, "unexpected weir record");
    }
}

bool codec_protocol_compatible(const struct codec_record *peer)
{
    return peer->oldest <= CODEC_PROTOCOL && CODEC_PROTOCOL_OLDEST <= peer->version;
}

uint64_t codec_block_hash(const void *data, size_t len, uint64_t seq)
{
    return XXH3_64bits_withSeed(data, len, seq);
}

uint64_t codec_wire_hash(uint64_t raw_hash, const void *payload, size_t wire_len)
{
    return XXH3_64bits_withSeed(payload, wire_len, raw_hash);
}

uint64_t codec_chain_start(const unsigned char *header)
{
    unsigned char h[CODEC_HEADER_SIZE];
    memcpy(h, header, sizeof h);
    h[13] = 1;   /* the version byte, as version 1 has it */
    return XXH3_64bits(h, sizeof h);
}

uint64_t codec_chain(uint64_t chain, uint64_t block_hash, uint32_t raw_len)
{
    unsigned char buf[20];
    codec_put64(buf, chain);
    codec_put64(buf + 8, block_hash);
    codec_put32(buf + 16, raw_len);
    return XXH3_64bits(buf, sizeof buf);
}

uint64_t codec_chain_hole(uint64_t chain, uint64_t hole_sum, uint64_t len)
{
    /* 24 bytes, where a block folds 20: the two never hash the same input */
    unsigned char buf[24];
    codec_put64(buf, chain);
    codec_put64(buf + 8, hole_sum);
    codec_put64(buf + 16, len);
    return XXH3_64bits(buf, sizeof buf);
}

uint64_t codec_pieces(size_t len, uint32_t piece_max)
{
    return len / piece_max + (len % piece_max != 0);
}

/* One piece of at most piece_max raw bytes; returns the bytes written. */
static size_t encode_piece(const unsigned char *src, size_t len, unsigned char *dst, int level,
                           uint64_t seq, uint32_t piece_max, unsigned sums)
{
    unsigned char *payload = dst + CODEC_FRAME_PREFIX;
    int clen = 0;
    if (level > 0) {
        /* a result that does not save anything is stored raw instead */
        int cap = (int)len - 1;
        if (level >= 3)
            clen = LZ4_compress_HC((const char *)src, (char *)payload, (int)len, cap, level);
        else
            clen = LZ4_compress_default((const char *)src, (char *)payload, (int)len, cap);
    }
    bool stored = clen <= 0;
    if (stored) {
        memcpy(payload, src, len);
        clen = (int)len;
    }
    codec_frame_prefix(dst, piece_max, (uint32_t)clen, stored);
    uint64_t hash = 0;
    if (sums & CODEC_SUMS_WEIR) {
        hash = codec_block_hash(src, len, seq);
        if (!stored)
            hash = codec_wire_hash(hash, payload, (size_t)clen);
    }
    codec_frame_suffix(payload + clen, seq, (uint32_t)len, hash);
    codec_put32(payload + clen + CODEC_FRAME_SUFFIX,
                (sums & CODEC_SUMS_FRAME) ? XXH32(payload, (size_t)clen, 0) : 0);
    return CODEC_PIECE_OVERHEAD + (size_t)clen;
}

size_t codec_encode(const unsigned char *src, size_t len, unsigned char *dst, int level,
                    uint64_t seq, uint32_t piece_max, unsigned sums)
{
    size_t pos = 0;
    for (size_t off = 0; off < len; off += piece_max, seq++) {
        size_t n = len - off < piece_max ? len - off : piece_max;
        pos += encode_piece(src + off, n, dst + pos, level, seq, piece_max, sums);
    }
    return pos;
}

size_t codec_end(unsigned char *dst, uint64_t total, uint64_t nblocks, uint64_t chain,
                 uint32_t content_sum)
{
    codec_trailer(dst, total, nblocks, chain);
    codec_put32(dst + CODEC_TRAILER_SIZE, 0);   /* EndMark */
    codec_put32(dst + CODEC_TRAILER_SIZE + 4, content_sum);
    return CODEC_END_SIZE;
}

/* Whether p starts a zstd piece: its 'Y' record. */
static bool zstd_piece(const unsigned char *p)
{
    return codec_get32(p) == CODEC_WEIR_MAGIC && p[8] == 'Y';
}

int codec_spans(const unsigned char *p, enum codec_form form, struct codec_span sp[2],
                size_t *total)
{
    if (zstd_piece(p)) {
        *total = CODEC_ZSTD_PIECE_OVERHEAD + codec_get32(p + 12);
        sp[0] = (struct codec_span){0, *total};
        return 1;
    }
    if (codec_get32(p) != CODEC_LZ4_MAGIC) {
        /* the end: trailer, then EndMark and content checksum */
        *total = CODEC_END_SIZE;
        sp[0] = form == CODEC_FORM_WEIR ? (struct codec_span){0, CODEC_TRAILER_SIZE}
                                        : (struct codec_span){CODEC_TRAILER_SIZE, CODEC_LZ4_END};
        return 1;
    }
    size_t s = codec_get32(p + CODEC_PIECE_PREFIX) & 0x7FFFFFFFu;
    *total = CODEC_PIECE_OVERHEAD + s;
    if (form == CODEC_FORM_WEIR) {
        sp[0] = (struct codec_span){0, CODEC_BLOCK_OVERHEAD + s};
        return 1;
    }
    sp[0] = (struct codec_span){CODEC_PIECE_PREFIX, 4 + s};
    sp[1] = (struct codec_span){CODEC_BLOCK_OVERHEAD + s, 4};
    return 2;
}

size_t codec_piece_record(const unsigned char *p, uint32_t *raw_len, uint64_t *hash)
{
    if (zstd_piece(p)) {
        size_t s = codec_get32(p + 12);
        const unsigned char *rec = p + CODEC_ANNOUNCE_SIZE + s;
        *raw_len = codec_get32(rec + 12);
        *hash = codec_get64(rec + 24);
        return CODEC_ZSTD_PIECE_OVERHEAD + s;
    }
    size_t s = codec_get32(p + CODEC_PIECE_PREFIX) & 0x7FFFFFFFu;
    const unsigned char *rec = p + CODEC_FRAME_PREFIX + s + 4;
    *raw_len = codec_get32(rec + 12);
    *hash = codec_get64(rec + 24);
    return CODEC_PIECE_OVERHEAD + s;
}

size_t codec_lz4_header(unsigned char *dst, uint32_t block_max, bool sized, uint64_t size)
{
    codec_put32(dst, CODEC_LZ4_MAGIC);
    /* version 01, independent blocks, block checksums, content checksum */
    dst[4] = (unsigned char)(0x40 | 0x20 | 0x10 | 0x04 | (sized ? 0x08 : 0));
    dst[5] = (unsigned char)(codec_bd_code(block_max) << 4);
    size_t len = 6;
    if (sized) {
        codec_put64(dst + 6, size);
        len += 8;
    }
    dst[len] = (unsigned char)((XXH32(dst + 4, len - 4, 0) >> 8) & 0xFF);
    return len + 1;
}

size_t codec_zero_block(unsigned char *dst, size_t cap, const unsigned char *zeros, size_t len)
{
    if (cap < 8 || len == 0 || len > CODEC_BLOCK_MAX)
        return 0;
    int clen = LZ4_compress_default((const char *)zeros, (char *)dst + 4, (int)len,
                                    (int)(cap - 8 < (size_t)INT32_MAX ? cap - 8 : INT32_MAX));
    if (clen <= 0)
        return 0;
    codec_put32(dst, (uint32_t)clen);
    codec_put32(dst + 4 + clen, XXH32(dst + 4, (size_t)clen, 0));
    return 8 + (size_t)clen;
}

long codec_decode_block(const unsigned char *src, size_t wire_len, bool stored,
                        unsigned char *dst, size_t cap)
{
    if (stored) {
        if (wire_len > cap)
            return -1;
        memcpy(dst, src, wire_len);
        return (long)wire_len;
    }
    if (wire_len > (size_t)LZ4_MAX_INPUT_SIZE || cap > (size_t)INT32_MAX)
        return -1;
    int n = LZ4_decompress_safe((const char *)src, (char *)dst, (int)wire_len, (int)cap);
    return n < 0 ? -1 : (long)n;
}
