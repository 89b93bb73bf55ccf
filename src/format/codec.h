/*
 * codec.h - the pieces of a weir stream and of weir's LZ4 and zstd files:
 * records, LZ4 frames, zstd pieces, checksums.
 *
 * Contract: pure functions over caller-owned memory.  No I/O, no locks, no
 * allocation but a thread's zstd contexts (codec_zstd_cctx/dctx, made once
 * and handed back by the caller); any thread may call them.
 * doc/stream-format.md is the normative description of what they produce;
 * in short:
 *
 *   stream  = header-record { block-frame block-record | hole-record }
 *             trailer-record
 *   block-frame  = one LZ4 frame holding exactly one independent block
 *                  (stored raw when compression does not pay) and an EndMark,
 *                  or in a zstd stream a 'Y' record and one zstd frame
 *   *-record     = an LZ4 skippable frame, magic 0x184D2A57, whose payload
 *                  starts with a type byte: 'H' header, 'B' block checksum,
 *                  'Z' hole (version 2), 'T' trailer, 'S' receiver status,
 *                  'Y' the length of the zstd frame that follows, 'z' the
 *                  same for a frame of a hole's zeros that a weir skips,
 *                  'A' sender abort, 'G' greeting and 'K' keepalive
 *                  (connections only), 'L' a link test's control
 *                  (linktest.h), 'N', 'C' and 'R' a resumable
 *                  session's token, confirmations and resume request
 *
 * All integers are little-endian.  Each block's checksum is XXH3-64 of its
 * raw data seeded with its sequence number (for a compressed block, folded
 * with its compressed bytes: codec_wire_hash); the trailer carries the byte
 * count, the block count and a chain hash over all block checksums, so a
 * dropped, duplicated, reordered, truncated or altered block is caught.
 * Version 2 adds the hole record: a run of zeros carried as its length,
 * numbered and chained like a block.  A sender writes version 2 only to a
 * receiver whose greeting offers CODEC_FEATURE_HOLES; an older reader
 * refuses a version 2 header ("unsupported weir stream version 2").
 *
 * That stream travels only between two weirs.  Files, pipes and commands
 * get one standard LZ4 frame instead, which every LZ4 decoder reads whole:
 *
 *   lz4-file = frame-header { block-size data block-checksum } EndMark
 *              content-checksum
 *
 * with independent blocks, an XXH32 checksum of each block's data and of
 * the whole content, and the content size when it is known in advance.
 * -z compresses each block once into pieces (codec_encode) that hold both
 * forms side by side; each output writes the spans of its form
 * (codec_spans).  The legacy LZ4 format (magic 0x184C2102) is only read.
 *
 * --zstd needs no second form: a weir stream whose blocks are zstd frames
 * (header flag CODEC_HEADER_ZSTD) is itself a zstd file, since every weir
 * record is a skippable frame to a zstd decoder.  So every output gets the
 * weir stream; a file's holes travel as 'Z' records each followed by a
 * 'z' record and frames of zeros (zstd has no holes; a weir skips them).
 */
#ifndef WEIR_CODEC_H
#define WEIR_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CODEC_LZ4_MAGIC 0x184D2204u
#define CODEC_SKIP_MAGIC_MIN 0x184D2A50u
#define CODEC_SKIP_MAGIC_MAX 0x184D2A5Fu
#define CODEC_WEIR_MAGIC 0x184D2A57u
#define CODEC_VERSION 2               /* the newest stream format: 2 has hole records */
#define CODEC_VERSION_OLDEST 1        /* the oldest this weir reads and writes */
#define CODEC_BLOCK_MAX (4u << 20)    /* the largest LZ4 frame block */
#define CODEC_LEGACY_MAGIC 0x184C2102u
#define CODEC_LEGACY_BLOCK (8u << 20) /* a legacy block's raw size (the last may be less) */
/* the longest compressed legacy block: LZ4's bound for CODEC_LEGACY_BLOCK */
#define CODEC_LEGACY_WIRE_MAX (CODEC_LEGACY_BLOCK + CODEC_LEGACY_BLOCK / 255 + 16)

#define CODEC_HEADER_SIZE 24          /* 8 + 16 */
#define CODEC_FRAME_PREFIX 11         /* magic, FLG, BD, HC, block size */
#define CODEC_FRAME_SUFFIX 36         /* EndMark + 'B' record (8 + 24) */
#define CODEC_BLOCK_OVERHEAD (CODEC_FRAME_PREFIX + CODEC_FRAME_SUFFIX)
#define CODEC_TRAILER_SIZE 40         /* 8 + 32 */
#define CODEC_HOLE_SIZE 40            /* 8 + 32: type, length, sequence number, checksum */
/* The most a stream holds, holes included: every byte of it is a file offset. */
#define CODEC_TOTAL_MAX ((uint64_t)INT64_MAX)
#define CODEC_LZ4_HEADER_MAX 15       /* an LZ4 frame header with its content size */
#define CODEC_LZ4_END 8               /* EndMark and content checksum */
/* -z's pieces: a block frame and its record (the weir form) with the
 * block's XXH32 checksum after them (for the frame form); and the end */
#define CODEC_PIECE_PREFIX 7          /* magic, FLG, BD, HC: the weir form only */
#define CODEC_PIECE_OVERHEAD (CODEC_BLOCK_OVERHEAD + 4)
#define CODEC_END_SIZE (CODEC_TRAILER_SIZE + CODEC_LZ4_END)
#define CODEC_STATUS_MAX 400          /* longest status message */
#define CODEC_STATUS_FIXED 32         /* 8 + type, code, pad, len, bytes, chain */
#define CODEC_SUM_SIZE 8              /* the checksum that ends G, K, S, A and L */

#define CODEC_HEADER_COMPRESSED 0x01  /* header flag: blocks may be LZ4-compressed */
/* header flag, only with COMPRESSED: every block is a 'Y' record and one
 * zstd frame (CODEC_FEATURE_ZSTD) */
#define CODEC_HEADER_ZSTD 0x04
#define CODEC_ZSTD_MAGIC 0xFD2FB528u
#define CODEC_ANNOUNCE_SIZE 24        /* 'Y' and 'z': 8 + type, pad, length, reserved */
#define CODEC_RECORD_B 32             /* the 'B' record */
/* the bytes a zstd piece adds to its compressed frame */
#define CODEC_ZSTD_PIECE_OVERHEAD (CODEC_ANNOUNCE_SIZE + CODEC_RECORD_B)
/* zstd's own bound for a frame of n bytes (ZSTD_COMPRESSBOUND) */
#define CODEC_ZSTD_BOUND(n) ((n) + ((n) >> 8) + \
                             ((n) < (128u << 10) ? ((128u << 10) - (n)) >> 11 : 0))
#define CODEC_ZSTD_LEVEL_MIN (-100)   /* --zstd's fastest level */
#define CODEC_ZSTD_LEVEL_MAX 19       /* its slowest */
/* header flag, never with COMPRESSED: the stream travels in sealed records
 * (seal.h), whose AEAD tags authenticate every byte of it, so its stored
 * blocks carry checksum 0 and are not hashed; a reader refuses it from any
 * other source */
#define CODEC_HEADER_SEALED 0x02

/* The connection protocol (greeting, keepalive, answer, abort), versioned
 * apart from the stream format.  A weir talks to a peer whose range of
 * versions [oldest, version] overlaps its own. */
#define CODEC_PROTOCOL 1
#define CODEC_PROTOCOL_OLDEST 1
#define CODEC_GREETING_SIZE 32        /* 8 + 16 + checksum */
#define CODEC_KEEPALIVE_SIZE 32       /* 8 + 16 + checksum */
#define CODEC_PHASE_MAX 2             /* the last phase a keepalive may name */
#define CODEC_PAYLOAD_MAX (CODEC_STATUS_FIXED - 8 + CODEC_STATUS_MAX + CODEC_SUM_SIZE)
#define CODEC_RECORD_MAX (8 + CODEC_PAYLOAD_MAX)   /* the longest weir record */

/* Greeting features: what an end can do.  Both ends use what both offer. */
#define CODEC_FEATURE_KEEPALIVE 0x1u  /* the receiver sends 'K' while it works */
#define CODEC_FEATURE_KEY 0x2u        /* this end has a key and talks only encrypted */
#define CODEC_FEATURE_HOLES 0x4u      /* the receiver reads stream version 2 (holes) */
/* a listener: it serves link tests (to holders of its key, or with
 * --allow-link-test to anyone); older weirs ignore the bit */
#define CODEC_FEATURE_LINKTEST 0x8u
/* resumable sessions (--reconnect): a sender that offers it can be told a
 * session token ('N'), confirmations ('C') follow what arrives, and after a
 * cut the sender comes back with 'R' and resumes where the receiver
 * stopped; a receiver offers it while it would wait for such a sender */
#define CODEC_FEATURE_RESUME 0x10u
/* a receiver of a resumable session confirms at least every this many
 * stream bytes (and sooner when the connection goes idle) */
#define CODEC_CONFIRM_BYTES (4u << 20)
/* a sender that may resume and reads what it sends again from its input
 * (a regular file) rather than holding it: a confirmation frees none of its
 * buffer, only its notes of where records began, so its receiver confirms
 * every CODEC_CONFIRM_REREAD_BYTES instead (each one costs both ends a
 * wakeup; the resume point is the receiver's count either way) */
#define CODEC_FEATURE_REREAD 0x20u
#define CODEC_CONFIRM_REREAD_BYTES (32u << 20)
/* with KEY: this end's sealed records are of the second form (32-byte
 * base keys from the exporter; an abort counts the data records before
 * it: doc/security.md).  An end with a key refuses a keyed peer without
 * it, naming the cause, rather than fail on the first record. */
#define CODEC_FEATURE_RECORDS2 0x40u
#define CODEC_FEATURES_KEYED (CODEC_FEATURE_KEY | CODEC_FEATURE_RECORDS2)
#define CODEC_OLDER_KEYED "its encrypted records are of an older weir's form (upgrade it)"
/* the answer's delivery is the sender's word: in a session that may
 * resume, a sender that sets it ends its stream with the trailer (it does
 * not close its direction), and once it has read the receiver's answer
 * says so in a 'D' record, then closes; a receiver that sets it counts its
 * answer delivered only on that 'D' (a relay that acknowledged the answer
 * and lost it cannot fool it), and gives it again to a sender that comes
 * back for it */
#define CODEC_FEATURE_ANSWER_READ 0x80u
/* the receiver reads streams whose blocks are zstd frames (CODEC_HEADER_ZSTD) */
#define CODEC_FEATURE_ZSTD 0x100u
/* the receiver is a service (weir --serve) that runs the target a keyed
 * sender names: such a sender's first sealed record holds its header and
 * then a 'P' record with the target's name (none: the client's first) */
#define CODEC_FEATURE_SERVE 0x200u
/* several connections for one transfer (--streams): a receiver offers it
 * when senders can join on its listening socket; a sender offers it only
 * when it spreads the stream, and then, once the receiver has named the
 * session ('N'), opens up to CODEC_STREAMS_MAX - 1 more connections that
 * each join it ('J', acknowledged by a 'J' back), and sends everything
 * after the stream header as chunks (codec_chunk) dealt out over all of
 * them; the receiver puts the chunks back in order.  The records to the
 * sender stay on the first connection. */
#define CODEC_FEATURE_STREAMS 0x400u
/* connections that join a spread transfer while it runs (--streams auto):
 * a receiver offers it with CODEC_FEATURE_STREAMS, and takes such joins
 * on its listening socket as long as the stream flows; a sender offers it
 * (with CODEC_FEATURE_STREAMS) when it begins the spread transfer with its
 * first connection alone, so the receiver gathers nothing at first, and
 * later joins carry 'J' with the connections' new count.  After a break
 * such a transfer begins again with one connection. */
#define CODEC_FEATURE_GROW 0x800u
#define CODEC_STREAMS_MAX 16
#define CODEC_FEATURES (CODEC_FEATURE_KEEPALIVE | CODEC_FEATURE_HOLES | \
                        CODEC_FEATURE_ANSWER_READ | CODEC_FEATURE_ZSTD)   /* every end's */
#define CODEC_FEATURES_KNOWN (CODEC_FEATURE_KEEPALIVE | CODEC_FEATURE_KEY | \
                              CODEC_FEATURE_HOLES | CODEC_FEATURE_LINKTEST | \
                              CODEC_FEATURE_RESUME | CODEC_FEATURE_REREAD | \
                              CODEC_FEATURE_RECORDS2 | CODEC_FEATURE_ANSWER_READ | \
                              CODEC_FEATURE_ZSTD | CODEC_FEATURE_SERVE | \
                              CODEC_FEATURE_STREAMS | CODEC_FEATURE_GROW)
/* Whether a greeting claims a key with records of an older form. */
static inline bool codec_keyed_older(uint32_t features)
{
    return (features & CODEC_FEATURE_KEY) && !(features & CODEC_FEATURE_RECORDS2);
}
#define CODEC_KEEPALIVE_SECS 0.5      /* how often a receiver sends 'K' */
#define CODEC_SILENCE_MIN 2.0         /* a sender's --timeout for the answer, at least */

/* 'T': a link tester (weir --link-test), on its control connection and on
 * each of its data connections.  A weir older than link tests refuses the
 * greeting as malformed, and says so in an 'S' record. */
enum codec_role { CODEC_ROLE_RECEIVER = 'R', CODEC_ROLE_SENDER = 'S', CODEC_ROLE_TESTER = 'T' };

/* 'L' records: a link test's control messages, all CODEC_LINK_SIZE bytes.
 * What n, a, b, c and the token mean depends on the op (doc/stream-format.md,
 * "Link tests"). */
#define CODEC_LINK_SIZE 64            /* 8 + 48 + checksum */
#define CODEC_TOKEN_SIZE 16
/* Resuming (doc/stream-format.md, "Reconnecting"): 'N' from the receiver
 * names the session (its token); 'C' confirms how many bytes of the stream
 * the receiver holds; 'R', the first record of a new connection, asks to
 * resume the session of its token.  Each is CODEC_SESSION_SIZE bytes. */
#define CODEC_SESSION_SIZE 40         /* 8 + 24 + checksum */
enum codec_link_op {
    CODEC_LINK_HELLO = 'H',     /* tester: the test it asks for */
    CODEC_LINK_WELCOME = 'W',   /* listener: the test's id (and secret, without a key) */
    CODEC_LINK_JOIN = 'J',      /* a data connection: which one, and its token */
    CODEC_LINK_READY = 'R',     /* listener: every data connection joined */
    CODEC_LINK_RUN = 'U',       /* tester: one measurement */
    CODEC_LINK_SENT = 'N',      /* the sending end: what it sent in one */
    CODEC_LINK_MEASURED = 'M',  /* listener: what it received in one */
    CODEC_LINK_PING = 'P',      /* tester: a round trip */
    CODEC_LINK_PONG = 'Q',      /* listener: its echo */
    CODEC_LINK_END = 'E',       /* either: the test is over */
};
/* Directions, as the tester sees them. */
enum codec_link_dir {
    CODEC_LINK_OUT = 'O',       /* from the tester to the listener */
    CODEC_LINK_IN = 'I',        /* from the listener to the tester */
    CODEC_LINK_BOTH = 'B',      /* both at once */
};
struct codec_link {
    unsigned char op, dir;      /* dir: RUN (O, I, B) and JOIN (O, I); else 0 */
    uint32_t n;
    uint64_t a, b, c;
    unsigned char token[CODEC_TOKEN_SIZE];
};

/* One parsed weir record.  Which fields are set depends on the type. */
/* 'P' (sender to a service, after its header in its first sealed record):
 * the target it asks for, a name of 0 to CODEC_TARGET_MAX characters of
 * [A-Za-z0-9._-] */
#define CODEC_TARGET_MAX 63
#define CODEC_PLACE_SIZE 88           /* 8 + 8 + 64 + checksum */
bool codec_target_name_ok(const char *name);

struct codec_record {
    unsigned char type;          /* 'H' 'Z' 'S' 'A' 'G' 'K' 'L' 'N' 'C' 'R' 'J' 'D' 'P' ('B' and
                                    'T': stream.c) */
    /* H */
    unsigned version, flags;
    uint32_t block_max;
    /* G: version above too */
    unsigned oldest;
    unsigned char role;
    uint32_t features;
    /* K */
    unsigned phase;
    /* S, A: code and message; S and K: bytes written; S: the chain of the
     * stream it received (the trailer's), which binds a success to it;
     * Z: bytes is the hole's length */
    int code;
    uint64_t bytes;
    uint64_t chain;
    /* Z: its sequence number and checksum */
    uint64_t seq, sum;
    char msg[CODEC_STATUS_MAX + 1];
    /* L */
    struct codec_link link;
    /* N, R, J: the session's token; C: bytes is what the receiver holds */
    unsigned char token[CODEC_TOKEN_SIZE];
    /* J: which connection of how many */
    unsigned join_index, join_count;
    /* G (a sender's), N: a service's route to the transfer (0: none) */
    uint32_t route;
    /* P: the target a sender asks a service for ("": the first of its own) */
    char target[CODEC_TARGET_MAX + 1];
};

static inline void codec_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

static inline void codec_put64(unsigned char *p, uint64_t v)
{
    codec_put32(p, (uint32_t)v);
    codec_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t codec_get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t codec_get64(const unsigned char *p)
{
    return (uint64_t)codec_get32(p) | (uint64_t)codec_get32(p + 4) << 32;
}

/* The LZ4 block-maximum code (4..7) for blocks of at most block_max bytes. */
unsigned codec_bd_code(uint32_t block_max);
uint32_t codec_bd_size(unsigned code);

/* Header record of stream version (CODEC_VERSION_OLDEST..CODEC_VERSION);
 * returns CODEC_HEADER_SIZE. */
size_t codec_header(unsigned char *dst, uint32_t block_max, unsigned flags, unsigned version);
/* Frame header and block size word for one block of wire_len payload bytes. */
size_t codec_frame_prefix(unsigned char *dst, uint32_t block_max, uint32_t wire_len,
                          bool stored);
/* EndMark and 'B' record. */
size_t codec_frame_suffix(unsigned char *dst, uint64_t seq, uint32_t raw_len, uint64_t hash);
/* The 'B' record alone (CODEC_RECORD_B bytes). */
size_t codec_block_record(unsigned char *dst, uint64_t seq, uint32_t raw_len, uint64_t hash);
/* 'Y' (a block's zstd frame) or 'z' (a hole's zeros): the wire_len bytes
 * that follow.  Returns CODEC_ANNOUNCE_SIZE. */
size_t codec_announce(unsigned char *dst, unsigned char type, uint32_t wire_len);
size_t codec_trailer(unsigned char *dst, uint64_t total, uint64_t nblocks, uint64_t chain);
/* 'Z' record (version 2): a hole of len (> 0) bytes of zeros, numbered seq
 * like a block, ending in a checksum of its first 32 bytes.  Returns
 * CODEC_HOLE_SIZE. */
size_t codec_hole(unsigned char *dst, uint64_t seq, uint64_t len);
/* 'S' record: code 0 is success; msg may be NULL.  dst holds
 * CODEC_RECORD_MAX bytes; chain is the received stream's (its trailer's)
 * chain, so that a success answer vouches for that very stream.  G, K, S and A records end in an XXH3-64 of
 * everything before it, so that a flipped byte on the way back (a failure
 * turned into success) is caught as surely as on the way out. */
size_t codec_status(unsigned char *dst, int code, uint64_t bytes, uint64_t chain,
                    const char *msg);
/* 'A' record from a sender that gives up; same layout as 'S'. */
size_t codec_abort(unsigned char *dst, int code, const char *msg);

/* 'G' record: the first thing each end of a connection sends. */
size_t codec_greeting(unsigned char *dst, enum codec_role role, uint32_t features);
/* A sender's greeting to a service, coming back: the route of its transfer
 * (from 'N') in bytes 20-23, which the service reads before the handshake
 * to hand the connection to that transfer's process (0: none) */
size_t codec_greeting_routed(unsigned char *dst, enum codec_role role, uint32_t features,
                             uint32_t route);
/* 'K' record: the receiver is alive, its outputs have written bytes, and
 * phase says what it is doing (session.h). */
size_t codec_keepalive(unsigned char *dst, uint64_t bytes, unsigned phase);

/* 'N' (the session's token), 'R' (resume the session of token):
 * CODEC_SESSION_SIZE bytes. */
/* 'N' from a service: the transfer's route in bytes 12-15 (0: none) */
size_t codec_session_routed(unsigned char *dst, unsigned char type,
                            const unsigned char token[CODEC_TOKEN_SIZE], uint32_t route);
size_t codec_session(unsigned char *dst, unsigned char type,
                     const unsigned char token[CODEC_TOKEN_SIZE]);
/* 'J': a connection joins the session of token as connection index
 * (1 .. count - 1) of count; the receiver acknowledges with the same
 * record.  CODEC_SESSION_SIZE bytes. */
size_t codec_join(unsigned char *dst, const unsigned char token[CODEC_TOKEN_SIZE],
                  unsigned index, unsigned count);

/* A chunk of a spread stream (CODEC_FEATURE_STREAMS): CODEC_CHUNK_HEADER
 * bytes, then len bytes of the stream.  Chunks are numbered from 0 across
 * all connections; on each connection their numbers rise. */
#define CODEC_CHUNK_HEADER 16
#define CODEC_CHUNK_MAX (256u << 10)
void codec_chunk(unsigned char *dst, uint64_t seq, uint32_t len);
/* 0 with *seq and *len (1 .. CODEC_CHUNK_MAX), or -1: not a chunk header. */
int codec_parse_chunk(const unsigned char *p, uint64_t *seq, uint32_t *len);

/* 'C': the receiver holds the stream's first bytes bytes (its header
 * included); CODEC_SESSION_SIZE bytes. */
size_t codec_confirm(unsigned char *dst, uint64_t bytes);
/* 'D': the sender read the receiver's answer, which said bytes and chain
 * (CODEC_FEATURE_ANSWER_READ); CODEC_SESSION_SIZE bytes. */
size_t codec_done(unsigned char *dst, uint64_t bytes, uint64_t chain);
/* 'P': the target name (codec_target_name_ok), CODEC_PLACE_SIZE bytes */
size_t codec_place(unsigned char *dst, const char *target);

/* 'L' record: one control message of a link test; CODEC_LINK_SIZE bytes. */
size_t codec_link(unsigned char *dst, const struct codec_link *l);

/* The length of the record whose first 8 bytes are at p (8 + payload), or 0
 * when those bytes are not the start of a weir record of a sane length. */
size_t codec_record_length(const unsigned char *p);
/* Parse one whole record of len bytes (codec_record_length).  Every
 * reserved byte must be zero and every length must agree.  Returns 0, or -1
 * with a reason in why ("malformed weir greeting", "unsupported weir stream
 * version 9 (this weir reads 1)").  The one parser of every record type:
 * the stream decoder, the listener and the sender's back channel use it. */
int codec_parse_record(const unsigned char *p, size_t len, struct codec_record *r, char *why,
                       size_t whylen);
/* Whether two protocol ranges overlap. */
bool codec_protocol_compatible(const struct codec_record *peer);

/* The checksum of one block's raw data. */
uint64_t codec_block_hash(const void *data, size_t len, uint64_t seq);
/* A compressed block's record carries this instead: the compressed bytes
 * hashed with the raw data's checksum as the seed, so it vouches for both
 * (a change LZ4 would decode to the same data is caught as well). */
uint64_t codec_wire_hash(uint64_t raw_hash, const void *payload, size_t wire_len);
/* The trailer's chain starts from the header record's hash, so the trailer
 * also vouches for the header; then each block is folded in.  The header is
 * hashed with its version byte read as 1, so that -z's one chain serves
 * receivers of both versions (the version byte is checked on its own). */
uint64_t codec_chain_start(const unsigned char *header);
uint64_t codec_chain(uint64_t chain, uint64_t block_hash, uint32_t raw_len);
/* A hole is folded in by its record's checksum and its length. */
uint64_t codec_chain_hole(uint64_t chain, uint64_t hole_sum, uint64_t len);

/* ---- -z: one compression, two forms ----
 *
 * A block of raw data is compressed once, in pieces of at most piece_max
 * (<= CODEC_BLOCK_MAX) raw bytes, each laid out as
 *
 *   0        prefix: LZ4 magic, FLG 0x60, BD, HC       (weir form)
 *   7        block size word (bit 31: stored)          (both)
 *   11       payload, S bytes                          (both)
 *   11+S     EndMark and 'B' record                    (weir form)
 *   47+S     XXH32 of the payload                      (frame form)
 *
 * The weir form (a connection to another weir) is bytes [0, 47+S): a block
 * frame and its record, as the weir stream has them.  The frame form
 * (files, pipes, commands) is [7, 11+S) and [47+S, 51+S): a data block of
 * one LZ4 frame, with its block checksum.  The end of the data is laid out
 * the same way: the weir trailer (weir form), then the frame's EndMark and
 * content checksum (frame form). */
enum codec_form { CODEC_FORM_WEIR, CODEC_FORM_FRAME };
struct codec_span {
    size_t off, len;
};

/* Which checksums codec_encode computes (the others are left 0): the
 * block records' (a weir form is written), the XXH32 block checksums (a
 * frame form is written). */
#define CODEC_SUMS_WEIR 0x1u
#define CODEC_SUMS_FRAME 0x2u

/* Pieces a block of len (> 0) raw bytes is cut into. */
uint64_t codec_pieces(size_t len, uint32_t piece_max);
/* Encode len (> 0) raw bytes as codec_pieces() pieces into dst, which must
 * hold len + that many CODEC_PIECE_OVERHEAD bytes; the first piece's
 * sequence number is seq.  level 0 stores raw, 1-2 is fast LZ4, 3-12
 * LZ4HC; a piece that compression would not shrink is stored.  Returns the
 * bytes written. */
size_t codec_encode(const unsigned char *src, size_t len, unsigned char *dst, int level,
                    uint64_t seq, uint32_t piece_max, unsigned sums);
/* --zstd: the same, each piece laid out as
 *
 *   0        'Y' record: the frame's length S          (weir form, both)
 *   24       one zstd frame of the piece, S bytes
 *   24+S     'B' record
 *
 * so both forms are the whole piece.  cctx is the caller's ZSTD_CCtx (one
 * per thread); dst must hold len + codec_pieces() * (CODEC_ZSTD_PIECE_OVERHEAD
 * + the zstd bound's slack) bytes (codec_zstd_room).  Returns the bytes
 * written, 0 if zstd failed. */
size_t codec_encode_zstd(const unsigned char *src, size_t len, unsigned char *dst, void *cctx,
                         int level, uint64_t seq, uint32_t piece_max, unsigned sums);
/* The same with each piece stored: a zstd frame of raw blocks, made with a
 * copy (for data that does not compress, such as an encrypted stream).
 * Cannot fail. */
size_t codec_store_zstd(const unsigned char *src, size_t len, unsigned char *dst, uint64_t seq,
                        uint32_t piece_max, unsigned sums);
/* The room codec_encode_zstd needs for len raw bytes. */
size_t codec_zstd_room(size_t len, uint32_t piece_max);
/* A 'z' record and one zstd frame of len (1 to CODEC_BLOCK_MAX) zeros, for
 * a hole in a zstd file: a zstd decoder writes the zeros, a weir skips them
 * (the 'Z' record before them says the hole).  Returns the bytes written, 0
 * if they do not fit in cap (CODEC_ZSTD_ZEROS_MAX always suffices: zeros
 * become one 4-byte block of zstd's per 128 KiB). */
#define CODEC_ZSTD_ZEROS_MAX 4096
size_t codec_zstd_zeros(unsigned char *dst, size_t cap, void *cctx, const unsigned char *zeros,
                        size_t len);
/* A thread's zstd contexts: made on first use (NULL when memory is
 * short), freed by the thread that used them. */
void *codec_zstd_cctx(void **cctx);
void *codec_zstd_dctx(void **dctx);
void codec_zstd_free(void **cctx, void **dctx);
/* Decode one zstd block payload (a whole frame) into dst with the caller's
 * ZSTD_DCtx.  Returns the raw length, or -1 if it is not one valid zstd
 * frame, or decodes to more than cap. */
long codec_decode_zstd(void *dctx, const unsigned char *src, size_t wire_len,
                       unsigned char *dst, size_t cap);

/* The end of the data: trailer, EndMark, content checksum (CODEC_END_SIZE). */
size_t codec_end(unsigned char *dst, uint64_t total, uint64_t nblocks, uint64_t chain,
                 uint32_t content_sum);
/* The spans of the piece (or end) at p that a form writes, in order, as
 * offsets from p; returns their count (1 or 2) and the bytes the piece
 * takes in all in *total. */
int codec_spans(const unsigned char *p, enum codec_form form, struct codec_span sp[2],
                size_t *total);
/* A piece's raw length and block-record checksum; returns its length. */
size_t codec_piece_record(const unsigned char *p, uint32_t *raw_len, uint64_t *hash);
/* The header of the one LZ4 frame a file gets: independent blocks of at
 * most block_max bytes, block and content checksums, and the content size
 * when sized.  Returns its length (7 or CODEC_LZ4_HEADER_MAX). */
size_t codec_lz4_header(unsigned char *dst, uint32_t block_max, bool sized, uint64_t size);
/* The frame form of one data block of len (1 to CODEC_BLOCK_MAX) zeros, for
 * a hole in an LZ4 frame (which has no holes): block size word, the zeros
 * LZ4-compressed, XXH32 of the payload.  zeros holds len zero bytes.
 * Returns the bytes written, 0 if they do not fit in cap (len / 255 + 64
 * always suffices). */
size_t codec_zero_block(unsigned char *dst, size_t cap, const unsigned char *zeros, size_t len);

/* Decode one block payload.  Returns the raw length, or -1 if the payload is
 * not valid LZ4 or does not fit in cap. */
long codec_decode_block(const unsigned char *src, size_t wire_len, bool stored,
                        unsigned char *dst, size_t cap);

#endif
