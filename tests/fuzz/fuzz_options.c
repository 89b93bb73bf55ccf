/*
 * fuzz_options.c - libFuzzer target for the option parser: the input is split
 * at NUL bytes into argv.  Any input must be accepted or rejected with a
 * usage error, never crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    char *argv[34];
    int argc = 0;
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    argv[argc++] = "weir";
    for (char *p = copy; p < copy + size && argc < 33; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    struct weir_options o;
    struct weir_error err;
    if (options_parse(argc, argv, &o, &err) != 0 && err.status != WEIR_EXIT_USAGE)
        abort();
    free(copy);
    return 0;
}
