/* linger.c - lingering close (linger.h). */
#include "linger.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "queue.h"

/* What the thread reads in one pass over its sockets at most (1 MiB from
 * each, 4 MiB in all), and the pause after a pass that read anything: at
 * most 100 MiB/s from one client (a 200 MB body in two seconds) and
 * 400 MiB/s in all, however many clients keep sending after their answer.
 * Measured (test_linger): 100 MB/s from one client with the pause, 3 GB/s
 * (a whole core) without it. */
#define DRAIN_PER_SOCKET ((size_t)1 << 20)
#define DRAIN_PER_PASS   ((size_t)4 << 20)
#define PASS_GAP_NS      (10 * 1000 * 1000)

struct lingerer {
    pthread_mutex_t mu; /* guards fds, until, n, stop and the counts */
    int *fds;
    double *until;     /* monotonic seconds: closed then even if still sending */
    struct pollfd *pf; /* the thread's: the wake pipe, then a snapshot of fds */
    bool *done;        /* the thread's: which of the snapshot to close */
    int n, max;
    double hold_s;
    bool stop;
    unsigned long long taken, refused;
    int wake[2]; /* a byte in wake[1] makes the thread poll again */
    pthread_t thread;
    char scratch[64 * 1024];
};

/* Read and drop what fd has now, at most DRAIN_PER_SOCKET and *budget
 * (which it lowers). true: the client closed (or failed), so fd can be
 * closed without a reset. */
static bool drain(lingerer *l, int fd, size_t *budget) {
    size_t cap = *budget < DRAIN_PER_SOCKET ? *budget : DRAIN_PER_SOCKET, got = 0;
    bool closed = false;
    while (got < cap) {
        size_t want = cap - got < sizeof l->scratch ? cap - got : sizeof l->scratch;
        ssize_t k = recv(fd, l->scratch, want, MSG_DONTWAIT);
        if (k > 0) {
            got += (size_t)k;
        } else if (k == 0) {
            closed = true;
            break;
        } else if (errno != EINTR) {
            closed = errno != EAGAIN && errno != EWOULDBLOCK;
            break;
        }
    }
    *budget -= got;
    return closed;
}

/* Close the held socket at index i and forget it (the last one takes its
 * place). Called with mu held. */
static void drop_locked(lingerer *l, int i) {
    close(l->fds[i]);
    l->n--;
    l->fds[i] = l->fds[l->n];
    l->until[i] = l->until[l->n];
}

static void *linger_main(void *arg) {
    lingerer *l = arg;
    thread_name("attn-linger");
    struct pollfd *pf = l->pf;
    bool *done = l->done;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        if (l->stop) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        /* only this thread removes sockets and linger_add only appends, so
         * the first n stay where they are (and open) until removed below */
        int n = l->n, timeout_ms = -1;
        double now = mono_now();
        pf[0] = (struct pollfd){.fd = l->wake[0], .events = POLLIN};
        for (int i = 0; i < n; i++) {
            pf[i + 1] = (struct pollfd){.fd = l->fds[i], .events = POLLIN};
            double left_ms = (l->until[i] - now) * 1e3 + 1;
            int ms = left_ms < 0 ? 0 : left_ms > 60e3 ? 60000 : (int)left_ms;
            if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = ms;
        }
        pthread_mutex_unlock(&l->mu);

        if (poll(pf, (nfds_t)n + 1, timeout_ms) < 0)
            for (int i = 0; i <= n; i++) pf[i].revents = 0; /* EINTR: only expiry now */
        if (pf[0].revents) {
            char b[64];
            while (read(l->wake[0], b, sizeof b) > 0) {
            }
        }
        size_t budget = DRAIN_PER_PASS;
        for (int i = 0; i < n; i++) done[i] = pf[i + 1].revents && drain(l, pf[i + 1].fd, &budget);

        pthread_mutex_lock(&l->mu);
        now = mono_now();
        /* from the end: a removal moves the last socket, seen or appended
         * since, into a place already passed */
        for (int i = n - 1; i >= 0; i--)
            if (done[i] || now >= l->until[i]) drop_locked(l, i);
        pthread_mutex_unlock(&l->mu);
        if (budget < DRAIN_PER_PASS) { /* read something: pause before the next pass */
            struct timespec gap = {0, PASS_GAP_NS};
            nanosleep(&gap, NULL);
        }
    }
    return NULL;
}

lingerer *linger_new(int max_fds, double hold_s) {
    lingerer *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->max = max_fds > 0 ? max_fds : 1;
    l->hold_s = hold_s;
    l->fds = calloc((size_t)l->max, sizeof *l->fds);
    l->until = calloc((size_t)l->max, sizeof *l->until);
    l->pf = calloc((size_t)l->max + 1, sizeof *l->pf);
    l->done = calloc((size_t)l->max, sizeof *l->done);
    l->wake[0] = l->wake[1] = -1;
    if (!l->fds || !l->until || !l->pf || !l->done || pipe2(l->wake, O_NONBLOCK | O_CLOEXEC) != 0)
        goto fail;
    pthread_mutex_init(&l->mu, NULL);
    if (pthread_create(&l->thread, NULL, linger_main, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        goto fail;
    }
    return l;
fail:
    if (l->wake[0] >= 0) close(l->wake[0]);
    if (l->wake[1] >= 0) close(l->wake[1]);
    free(l->fds);
    free(l->until);
    free(l->pf);
    free(l->done);
    free(l);
    return NULL;
}

void linger_add(lingerer *l, int fd) {
    if (fd < 0) return;
    shutdown(fd, SHUT_WR); /* the answer is out: tell the client there is no more */
    if (!l) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&l->mu);
    bool held = !l->stop && l->n < l->max;
    if (held) {
        l->fds[l->n] = fd;
        l->until[l->n] = mono_now() + l->hold_s;
        l->n++;
        l->taken++;
    } else {
        l->refused++;
    }
    pthread_mutex_unlock(&l->mu);
    if (!held) {
        close(fd);
        return;
    }
    ssize_t w = write(l->wake[1], "", 1); /* full pipe: a wake-up is pending anyway */
    (void)w;
}

int linger_held(lingerer *l) {
    if (!l) return 0;
    pthread_mutex_lock(&l->mu);
    int n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

void linger_counts(lingerer *l, unsigned long long *taken, unsigned long long *refused) {
    *taken = *refused = 0;
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    *taken = l->taken;
    *refused = l->refused;
    pthread_mutex_unlock(&l->mu);
}

void linger_free(lingerer *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_mutex_unlock(&l->mu);
    ssize_t w = write(l->wake[1], "", 1);
    (void)w;
    pthread_join(l->thread, NULL);
    for (int i = 0; i < l->n; i++) close(l->fds[i]);
    close(l->wake[0]);
    close(l->wake[1]);
    pthread_mutex_destroy(&l->mu);
    free(l->fds);
    free(l->until);
    free(l->pf);
    free(l->done);
    free(l);
}
