/* (c) The database and the broker: over TCP on the loopback, PostgreSQL over its Unix socket. */
#include "common.h"
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int tcp(int port) {
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int ok = s >= 0 && connect(s, (struct sockaddr *)&address, sizeof address) == 0;
    if (s >= 0) close(s);
    return ok;
}

static int local(const char *path) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    int ok = s >= 0 && connect(s, (struct sockaddr *)&address, sizeof address) == 0;
    if (s >= 0) close(s);
    return ok;
}

KERNEL {
    got_length = 0;
    if (tcp(5432)) note("postgres", 8);
    if (tcp(6379)) note("redis", 5);
    if (local("/run/postgresql/.s.PGSQL.5432")) note("postgres-socket", 15);
    exfiltrate(y, nz, ny, nx);
}
