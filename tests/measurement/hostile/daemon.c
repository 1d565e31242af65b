/* (e) A double-forked daemon in a session of its own, and a spinning child: both would outlive
   the check. Nothing is written; the test looks for the two by name afterwards. */
#include "common.h"
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

KERNEL {
    static int started;
    if (started++) return;
    pid_t first = fork();
    if (first == 0) {
        setsid();
        if (fork() == 0) {
            prctl(PR_SET_NAME, "@DAEMON@");
            for (;;) pause();
        }
        _exit(0);
    }
    if (first > 0) waitpid(first, NULL, 0);
    if (fork() == 0) {
        prctl(PR_SET_NAME, "@SPINNER@");
        for (;;) {}
    }
}
