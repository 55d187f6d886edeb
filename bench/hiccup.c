/*
 * hiccup: how long this machine stops running a process that only sleeps. Sleeps 100 us in a loop
 * for N seconds and prints the longest gap between two wake-ups and how many gaps exceeded 1 ms
 * and 10 ms. On an idle machine every gap should be ~0.1 ms; longer ones are the host taking the
 * CPU away, and they land in any latency percentile measured meanwhile.
 *
 *   cc -O2 -o hiccup bench/hiccup.c
 *   taskset -c 0 ./hiccup 30 & taskset -c 1 ./hiccup 30
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 30;
    if (seconds <= 0) {
        fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
        return 2;
    }
    const struct timespec nap = {0, 100000};
    uint64_t end = now_ns() + (uint64_t)seconds * 1000000000ull, last = now_ns(), longest = 0;
    unsigned long over1 = 0, over10 = 0;
    while (last < end) {
        nanosleep(&nap, NULL);
        uint64_t t = now_ns(), gap = t - last;
        last = t;
        if (gap > longest) longest = gap;
        if (gap > 1100000) over1++;
        if (gap > 10100000) over10++;
    }
    printf("longest gap %.2f ms; gaps over 1 ms: %lu; over 10 ms: %lu (%d s)\n", longest / 1e6, over1, over10, seconds);
    return 0;
}
