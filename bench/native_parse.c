/*
 * The native parser's cost per response, for bench/parser_cost.py to count under callgrind:
 *
 *     native_parse FILE N
 *
 * parses the response in FILE N times, each a fresh soak_response fed the whole response in
 * one read, as the engine will on a keep-alive connection; prints the body bytes read.
 */
#include <stdio.h>
#include <stdlib.h>

#include "response.h"

int main(int argc, char **argv)
{
    static unsigned char data[65536];
    unsigned long long body = 0;
    if (argc != 3) {
        fprintf(stderr, "usage: native_parse FILE N\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        perror(argv[1]);
        return 2;
    }
    size_t len = fread(data, 1, sizeof data, f);
    fclose(f);
    unsigned long n = strtoul(argv[2], NULL, 10);
    for (unsigned long i = 0; i < n; i++) {
        soak_response r;
        soak_response_init(&r, 0, 100 * 1024);
        if (soak_response_feed(&r, data, len) != len || r.outcome != SOAK_DONE) {
            fprintf(stderr, "native_parse: %s is not one whole response\n", argv[1]);
            return 1;
        }
        body += r.body_bytes;
    }
    printf("%llu\n", body);
    return 0;
}
