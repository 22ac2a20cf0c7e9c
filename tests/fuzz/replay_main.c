/*
 * A main for fuzz_response.c without libFuzzer: every input named (a file, or every file of a
 * directory) run once through LLVMFuzzerTestOneInput, which aborts on a broken promise. It is
 * for machines and compilers libFuzzer is not on: a cross compiler for arm64, whose parser has
 * no SSE2 scans, run under qemu-user (docs/development.md):
 *
 *     aarch64-linux-gnu-gcc -O2 -static -Wall -Wextra -Werror -I runner/load/native \
 *         tests/fuzz/fuzz_response.c tests/fuzz/replay_main.c runner/load/native/response.c -o replay
 *     qemu-aarch64-static ./replay tests/fuzz/corpus/response
 *
 * It prints how many inputs it ran; it exits 1 if an input cannot be read, 2 without any.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX (1u << 20) /* the corpus's inputs are a few KB at most */

static unsigned char input[INPUT_MAX];

/* One input, as libFuzzer's -runs=0 would run it. 0, or -1 when it cannot be read. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t n = fread(input, 1, sizeof input, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad)
        return -1;
    LLVMFuzzerTestOneInput(input, n);
    return 0;
}

/* Every file of a directory, or the file itself; how many ran, or -1 when one could not be read. */
static long run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode))
        return run_file(path) == 0 ? 1 : -1;
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -1;
    long ran = 0;
    char name[4096];
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        if ((size_t)snprintf(name, sizeof name, "%s/%s", path, e->d_name) >= sizeof name || run_file(name) != 0) {
            fprintf(stderr, "replay: cannot read %s/%s\n", path, e->d_name);
            ran = -1;
            break;
        }
        ran++;
    }
    closedir(dir);
    return ran;
}

int main(int argc, char **argv)
{
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long ran = run_path(argv[i]);
        if (ran < 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 1;
        }
        total += ran;
    }
    printf("replay: %ld inputs, every promise kept\n", total);
    return total > 0 ? 0 : 2;
}
