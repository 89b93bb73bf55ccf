/*
 * fuzz_handshake.c - libFuzzer target for the framing of an encrypted
 * connection's start, as a listener sees it: the sender's greeting (the one
 * record parser, codec_parse_record), the record after it when the bytes
 * make one (a header, a resume request, a session record, a service's target
 * record or route), then the TLS handshake bytes through
 * tls_step() (weir's own check of the TLS record headers, and OpenSSL's
 * parser behind it) with a fixed test key.  The first byte sets how many
 * bytes each step is given, so record boundaries fall everywhere.
 */
#include <stdlib.h>
#include <string.h>

#include "crypto/keyfile.h"
#include "crypto/tls.h"
#include "format/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 + CODEC_GREETING_SIZE)
        return 0;
    size_t chunk = (size_t)data[0] * 13 + 1;
    data++;
    size--;
    struct codec_record r;
    char why[160];
    (void)codec_parse_record(data, CODEC_GREETING_SIZE, &r, why, sizeof why);
    data += CODEC_GREETING_SIZE;
    size -= CODEC_GREETING_SIZE;
    /* what follows a keyless greeting: a stream header, or a resume request
     * ('R'); and what a sender reads back ('N', 'C', 'S', 'K') */
    size_t first = size >= 8 ? codec_record_length(data) : 0;
    if (first > 0 && first <= size)
        (void)codec_parse_record(data, first, &r, why, sizeof why);
    static struct key key = {.id = "fuzz"};
    static struct keyring ring = {.keys = &key, .nkeys = 1};
    static struct tls_context *ctx;
    struct weir_error err;
    if (!ctx && tls_context_new(&ctx, &ring, NULL, true, &err))
        return 0;
    struct tls_handshake *h;
    if (tls_handshake_new(&h, ctx, &err))
        return 0;
    static unsigned char out[65536];
    for (size_t off = 0; off < size;) {
        size_t take = size - off < chunk ? size - off : chunk, outlen = sizeof out;
        int st = tls_step(h, data + off, take, out, &outlen, &err);
        off += take;
        if (st != TLS_WANT)
            break;
    }
    tls_handshake_free(h);
    return 0;
}
