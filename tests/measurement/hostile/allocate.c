/* (f) More memory than the sandbox allows. Within the limit malloc fails and nothing is
   written; without it two touched pages are enough to tell (the test needs no real memory). */
#include "common.h"
#include <stdlib.h>

KERNEL {
    size_t want = (size_t)@BYTES@ULL;
    char *p = malloc(want);
    if (!p) return;
    p[0] = 1;
    p[want - 1] = 1;
    got_length = 0;
    note("allocated", 9);
    exfiltrate(y, nz, ny, nx);
    free(p);
}
