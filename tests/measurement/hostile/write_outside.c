/* (d) Writing outside its scratch: a library planted in (or appended to) the build cache, the
   repository, the var dir, the shared temporary folders, the service's home. */
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

static const char *TARGETS[] = {"@CACHE@/planted-@NONCE@.so", "/run/forgestencil-build-cache/planted-@NONCE@.so",
                                "@REPO@/planted-@NONCE@", "@VAR@/planted-@NONCE@", "/var/tmp/planted-@NONCE@",
                                "@HOME@/planted-@NONCE@", NULL};
static const char *CACHES[] = {"@CACHE@", "/run/forgestencil-build-cache", NULL};

KERNEL {
    got_length = 0;
    for (int i = 0; TARGETS[i]; i++) {
        FILE *file = fopen(TARGETS[i], "w");
        if (!file) continue;
        fputs("planted", file);
        fclose(file);
        note(TARGETS[i], strlen(TARGETS[i]));
    }
    for (int i = 0; CACHES[i]; i++) {
        DIR *folder = opendir(CACHES[i]);
        for (struct dirent *entry; folder && (entry = readdir(folder));) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", CACHES[i], entry->d_name);
            int fd = strstr(entry->d_name, ".so") ? open(path, O_WRONLY | O_APPEND) : -1;
            if (fd >= 0) { note(path, strlen(path)); close(fd); }
        }
        if (folder) closedir(folder);
    }
    exfiltrate(y, nz, ny, nx);
}
