/*
 * replay.c - run a fuzz target over corpus files without libFuzzer, so that
 * `meson test` replays the committed corpus under gcc (and any sanitizer the
 * build enables).  Arguments are files or directories of files.  It fails if
 * it found no file: a replay that ran nothing must not pass.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *p = realloc(buf, cap);
            if (!p) {
                fclose(f);
                free(buf);
                return -1;
            }
            buf = p;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    int bad = ferror(f);
    fclose(f);
    if (!bad)
        LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return bad ? -1 : 1;
}

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path);
    DIR *dir = opendir(path);
    if (!dir) {
        perror(path);
        return -1;
    }
    int count = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        int r = run_path(sub);
        if (r < 0) {
            closedir(dir);
            return -1;
        }
        count += r;
    }
    closedir(dir);
    return count;
}

int main(int argc, char **argv)
{
    int total = 0;
    for (int i = 1; i < argc; i++) {
        int r = run_path(argv[i]);
        if (r < 0)
            return 1;
        total += r;
    }
    printf("replayed %d inputs\n", total);
    return total > 0 ? 0 : 1;
}
