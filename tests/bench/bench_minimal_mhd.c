/* bench_minimal_mhd.c - the baseline for the HTTP benchmark: a minimal
 * libmicrohttpd server with the daemon's threading (internal epoll threads,
 * a pool of 2) that reads any request body and answers a fixed JSON body of
 * a given size (default: the size of the daemon's answer to the small
 * request). It does no parsing and no computing: what the daemon's req/s is
 * compared with is the cost of HTTP itself.
 *
 * SPIN_US, if given, makes it burn that many microseconds of its thread's
 * CPU time on each request before answering: the same server charged with a
 * fixed amount of work (the daemon's decode, compute and encode of a small
 * request, say), to see what rate that work alone leaves.
 *
 *   bench_minimal_mhd PORT [BODY_BYTES] [IO_THREADS] [SPIN_US]
 */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct MHD_Response *fixed;
#define SIZED_MAX ((size_t)64 << 20)
static char *sized; /* SIZED_MAX bytes for ?bytes=N */
static long spin_ns;

static long thread_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void spin(void) {
    long until = thread_ns() + spin_ns;
    while (thread_ns() < until) {
    }
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upsize, void **con_cls) {
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    if (!*con_cls) { /* first call: headers only */
        *con_cls = (void *)1;
        return MHD_YES;
    }
    if (*upsize) { /* read and drop the body */
        *upsize = 0;
        return MHD_YES;
    }
    if (spin_ns)
        spin();
    const char *want = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "bytes");
    if (want) {
        size_t n = (size_t)strtoull(want, NULL, 10);
        if (n > SIZED_MAX) n = SIZED_MAX;
        struct MHD_Response *r = MHD_create_response_from_buffer(n, sized, MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
    }
    return MHD_queue_response(c, 200, fixed);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [BODY_BYTES] [IO_THREADS] [SPIN_US]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    size_t n = argc > 2 ? (size_t)atol(argv[2]) : 4906;
    unsigned io = argc > 3 ? (unsigned)atoi(argv[3]) : 2;
    spin_ns = argc > 4 ? (long)(atof(argv[4]) * 1000.0) : 0;
    if (n < 16) n = 16;
    char *body = malloc(n);
    /* {"output":[0.123456,...]} padded to n bytes */
    size_t k = (size_t)snprintf(body, n, "{\"output\":[");
    while (k + 12 < n) k += (size_t)snprintf(body + k, n - k, "0.1234567,");
    while (k < n - 2) body[k++] = ' ';
    body[k++] = ']';
    body[k++] = '}';
    fixed = MHD_create_response_from_buffer(n, body, MHD_RESPMEM_PERSISTENT);
    sized = malloc(SIZED_MAX);
    if (!sized) return 1;
    memset(sized, '7', SIZED_MAX);
    MHD_add_response_header(fixed, "Content-Type", "application/json");
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port, NULL, NULL, on_access,
        NULL, MHD_OPTION_THREAD_POOL_SIZE, io, MHD_OPTION_CONNECTION_LIMIT, (unsigned)512,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "cannot listen on %d\n", port);
        return 1;
    }
    fprintf(stderr, "minimal server on %d, %zu-byte body, %u threads, %ld ns of work a request\n",
            port, n, io, spin_ns);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigprocmask(SIG_BLOCK, &s, NULL);
    int sig;
    sigwait(&s, &sig);
    MHD_stop_daemon(d);
    MHD_destroy_response(fixed);
    free(body);
    free(sized);
    return 0;
}
