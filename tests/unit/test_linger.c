/* test_linger.c - lingering close over real loopback TCP: a client that is
 * still sending its body when the server answers and closes gets the whole
 * answer and a clean end of stream, where closing at once (the control)
 * breaks its send; held sockets are closed when the client closes, when
 * their time is up, or when the lingerer stops; past max_fds they are
 * closed at once; a client that keeps sending is drained at a bounded rate. */
#include "linger.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "queue.h"

#define ANSWER "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n\r\n"
/* more than loopback's socket buffers can absorb, so the send completes
 * only if the server reads it */
#define BODY_BYTES ((size_t)48 << 20)

static int listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 8) ||
        getsockname(fd, (struct sockaddr *)&a, &al))
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* A connected pair: *cli (the client's end) and the server's end (returned). */
static int pair(int lfd, int port, int *cli) {
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    *cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*cli < 0 || connect(*cli, (struct sockaddr *)&a, sizeof a)) return -1;
    return accept(lfd, NULL, NULL);
}

/* The client's side: send the body (0 when all of it went, else errno),
 * then read to the end: *got gets the bytes read, *clean_end whether the
 * stream ended with a FIN rather than a reset. */
static int client_send_then_read(int fd, char *got, size_t cap, bool *clean_end) {
    static char body[1 << 16];
    int err = 0;
    for (size_t sent = 0; sent < BODY_BYTES;) {
        ssize_t k = send(fd, body, sizeof body, MSG_NOSIGNAL);
        if (k < 0) {
            err = errno;
            break;
        }
        sent += (size_t)k;
    }
    size_t n = 0;
    *clean_end = false;
    for (;;) {
        ssize_t k = recv(fd, got + n, cap - 1 - n, 0);
        if (k <= 0) {
            *clean_end = k == 0;
            break;
        }
        n += (size_t)k;
        if (n == cap - 1) break;
    }
    got[n] = 0;
    return err;
}

static void nap(double s) {
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

/* Wait up to secs for linger_held(l) == want. */
static bool held_becomes(lingerer *l, int want, double secs) {
    double end = mono_now() + secs;
    while (linger_held(l) != want && mono_now() < end) nap(0.01);
    return linger_held(l) == want;
}

int main(void) {
    int port = 0, lfd = listener(&port);
    CHECK(lfd >= 0);
    char got[4096];
    bool clean;

    /* the control: answer, close at once, the client's send breaks */
    {
        int cli, srv = pair(lfd, port, &cli);
        CHECK(srv >= 0);
        CHECK(write(srv, ANSWER, strlen(ANSWER)) == (ssize_t)strlen(ANSWER));
        shutdown(srv, SHUT_WR);
        close(srv);
        int err = client_send_then_read(cli, got, sizeof got, &clean);
        CHECK_MSG(err == EPIPE || err == ECONNRESET,
                  "control: closing at once should break a %zu MiB send; got errno %d",
                  BODY_BYTES >> 20, err);
        close(cli);
    }

    /* lingering: the send completes, the answer and a clean end follow */
    lingerer *l = linger_new(4, 10.0);
    CHECK(l != NULL);
    {
        int cli, srv = pair(lfd, port, &cli);
        CHECK(write(srv, ANSWER, strlen(ANSWER)) == (ssize_t)strlen(ANSWER));
        linger_add(l, srv);
        CHECK_INT_EQ(linger_held(l), 1);
        int err = client_send_then_read(cli, got, sizeof got, &clean);
        CHECK_MSG(err == 0, "lingering: the %zu MiB send failed: %s", BODY_BYTES >> 20,
                  strerror(err));
        CHECK_STR_EQ(got, ANSWER);
        CHECK_MSG(clean, "lingering: the stream ended with a reset, not a FIN");
        close(cli);
        CHECK_MSG(held_becomes(l, 0, 5.0), "the socket is still held after the client closed");
    }

    /* a client that keeps sending after its answer: drained, at a bounded
     * rate (1 MiB a pass from one socket, 10 ms between passes: 100 MiB/s;
     * without the pause it drains at a whole core's speed, 3 GB/s here) */
    {
        int cli, srv = pair(lfd, port, &cli);
        linger_add(l, srv);
        static char chunk[1 << 16];
        size_t sent = 0;
        double t0 = mono_now();
        while (mono_now() - t0 < 1.0) {
            struct pollfd pw = {.fd = cli, .events = POLLOUT};
            if (poll(&pw, 1, 50) <= 0) continue;
            ssize_t k = send(cli, chunk, sizeof chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0)
                sent += (size_t)k;
            else if (errno != EAGAIN && errno != EINTR)
                break;
        }
        double secs = mono_now() - t0;
        CHECK_MSG(sent > ((size_t)16 << 20), "only %zu MiB drained in %.2f s", sent >> 20, secs);
        CHECK_MSG((double)sent / secs < 200e6, "drained %.0f MB/s: the rate bound does not hold",
                  (double)sent / secs / 1e6);
        printf("a client sending for %.2f s: %.0f MB/s drained\n", secs, (double)sent / secs / 1e6);
        close(cli);
        CHECK(held_becomes(l, 0, 5.0));
    }

    /* a client that neither sends nor closes is let go after hold_s */
    linger_free(l);
    l = linger_new(2, 0.3);
    {
        int cli, srv = pair(lfd, port, &cli);
        double t0 = mono_now();
        linger_add(l, srv);
        CHECK(held_becomes(l, 0, 5.0));
        double held = mono_now() - t0;
        CHECK_MSG(held >= 0.25 && held < 3.0, "held %.2f s with hold_s 0.3", held);
        close(cli);
    }

    /* past max_fds, closed at once (and counted); the rest go at linger_free */
    {
        int cli[3], srv[3];
        for (int i = 0; i < 3; i++) srv[i] = pair(lfd, port, &cli[i]);
        unsigned long long taken0, refused0, taken, refused;
        linger_counts(l, &taken0, &refused0);
        for (int i = 0; i < 3; i++) linger_add(l, srv[i]);
        linger_counts(l, &taken, &refused);
        CHECK_INT_EQ(taken - taken0, 2);
        CHECK_INT_EQ(refused - refused0, 1);
        CHECK_INT_EQ(linger_held(l), 2);
        linger_free(l);
        l = NULL;
        for (int i = 0; i < 3; i++) { /* every server end is closed: each client sees the end */
            ssize_t k = recv(cli[i], got, sizeof got, 0);
            CHECK_MSG(k <= 0, "client %d: the server's end is still open (read %zd)", i, k);
            close(cli[i]);
        }
    }

    /* no lingerer (out of memory at start): closed at once, no crash */
    {
        int cli, srv = pair(lfd, port, &cli);
        linger_add(NULL, srv);
        CHECK(recv(cli, got, sizeof got, 0) <= 0);
        close(cli);
        linger_add(NULL, -1);
        linger_free(NULL);
    }
    close(lfd);
    return check_exit();
}
