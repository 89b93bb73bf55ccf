/*
 * fuzz_stream.c - libFuzzer target for the stream decoder: any input must be
 * either decoded or rejected with an error, never crash, hang or leak.  The
 * first byte picks how many bytes each read returns, so staging-buffer
 * boundaries fall everywhere, and by its lowest bit whether the bytes count
 * as coming out of sealed records (which admits streams without checksums).
 */
#include <stdlib.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)data[0] * 97 + 1;
    uint8_t *out = NULL;
    size_t len = 0;
    struct weir_error err;
    if (harness_decode_from(data + 1, size - 1, chunk, data[0] & 1, &out, &len, &err) == 0)
        free(out);
    return 0;
}
