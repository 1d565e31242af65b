/* An application (built and run by the application gate) that attacks from its build and its
   runs: the service's environment, the signing keys, the database, files outside its own folder
   (the other variant's build among them), a daemon. It prints how many attacks worked. */
#include <arpa/inet.h>
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
    if (fork() == 0) {
        setsid();
        prctl(PR_SET_NAME, "@DAEMON@");
        for (;;) pause();
    }
    printf("attacks_that_worked=%d\nVERIFICATION: PASSED\n", worked);
    return 0;
}
