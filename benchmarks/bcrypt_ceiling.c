/*
 * bcrypt's own ceiling on this machine: the C code HummingbirdBcrypt hashes
 * with (its CBcrypt target, compiled -O2 as a release build does), hashing on
 * THREADS threads for SECONDS, with nothing else running.
 *
 *   cc -O2 -pthread -I CBCRYPT/include bcrypt_ceiling.c CBCRYPT/bcrypt.c CBCRYPT/blf.c
 *   ./a.out COST THREADS SECONDS
 *
 * benchmarks/suite.py builds and runs it beside the creates row.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "bcrypt.h"

static int cost;
static double seconds;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *hash_until_time(void *count) {
    uint8_t csalt[16] = {0};
    char salt[BCRYPT_SALTSPACE], out[BCRYPT_HASHSPACE];
    if (c_hb_bcrypt_initsalt_with_csalt(cost, salt, sizeof salt, csalt) != 0) return NULL;
    double end = now() + seconds;
    long done = 0;
    while (now() < end) {
        if (c_hb_bcrypt_hashpass("correct horse battery staple", salt, out, sizeof out) != 0) return NULL;
        done++;
    }
    *(long *)count = done;
    return count;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s COST THREADS SECONDS\n", argv[0]);
        return 2;
    }
    cost = atoi(argv[1]);
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    if (threads < 1 || threads > 256 || seconds <= 0) return 2;
    pthread_t ids[256];
    long counts[256];
    for (int i = 0; i < threads; i++) pthread_create(&ids[i], NULL, hash_until_time, &counts[i]);
    long total = 0;
    for (int i = 0; i < threads; i++) {
        void *result;
        pthread_join(ids[i], &result);
        if (result == NULL) return 1;
        total += counts[i];
    }
    printf("%.0f hashes/s on %d threads (%.3f ms each)\n", total / seconds, threads, seconds * threads * 1000.0 / total);
    return 0;
}
