/* An application (built and run by the application gate) that attacks from its build and its
   runs: the service's environment, the signing keys, the database, files outside its own folder
   (the other variant's build among them), the pipe on which its wall time is reported, a
   daemon. It prints how many attacks worked. */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *READ[] = {"@VAR@/checkpoint-signing.key", "@SERVICE_VAR@/checkpoint-signing.key", NULL};
static const char *WRITE[] = {"@REPO@/planted-@NONCE@-app", "@OTHER@/planted-@NONCE@-app", "/var/tmp/planted-@NONCE@-app", NULL};

int main(void) {
    int worked = 0;
    worked += getenv("DATABASE_URL") != NULL || getenv("SECRET_KEY") != NULL || getenv("LEDGER_SIGNING_KEY") != NULL;
    for (int i = 0; READ[i]; i++) {
        FILE *file = fopen(READ[i], "r");
        if (file) { worked++; fclose(file); }
    }
    for (int i = 0; WRITE[i]; i++) {
        FILE *file = fopen(WRITE[i], "w");
        if (file) { worked++; fclose(file); }
    }
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(5432)};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    worked += s >= 0 && connect(s, (struct sockaddr *)&address, sizeof address) == 0;
    char folder[64];
    snprintf(folder, sizeof folder, "/proc/%d/fd", (int)getppid());
    DIR *fds = opendir(folder);
    for (struct dirent *entry; fds && (entry = readdir(fds));) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", folder, entry->d_name);
        int fd = entry->d_name[0] == '.' ? -1 : open(path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0) { worked += write(fd, "0.000001", 8) == 8; close(fd); }
    }
    if (fds) closedir(fds);
    if (fork() == 0) {
        setsid();
        prctl(PR_SET_NAME, "@DAEMON@");
        for (;;) pause();
    }
    printf("attacks_that_worked=%d\nVERIFICATION: PASSED\n", worked);
    return 0;
}
