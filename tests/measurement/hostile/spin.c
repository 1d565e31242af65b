/* (g) Never returns, and leaves a spinning child behind: the check times out, and both die with it. */
#include "common.h"
#include <sys/prctl.h>
#include <unistd.h>

KERNEL {
    if (fork() == 0) prctl(PR_SET_NAME, "@SPINNER@");
    for (;;) {}
}
