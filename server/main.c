/* main.c - attention-server: start-up, --check, --healthcheck, signals.
 *
 * Start-up order: pick the BLAS kernel (may re-exec once), read the
 * configuration, verify the BLAS, load and verify every weight set, start
 * the compute pool, the reload thread and the HTTP side, then wait for
 * signals: SIGHUP asks the reload thread to re-read the models, SIGTERM and
 * SIGINT drain and stop. Signals are taken with sigtimedwait here, never by
 * a handler. Any failure before listening exits 1 with a message naming
 * the file, key or tensor at fault. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "attention.h"
#include "blas.h"
#include "gemm.h"
#include "budget.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "models.h"
#include "pool.h"
#include "reload.h"

#ifndef ATTN_VERSION
#define ATTN_VERSION "dev"
#endif

/* --healthcheck URL: a minimal HTTP/1.0 GET (the container image has no
 * curl). Exit 0 on a 200 answer within 5 seconds. */
static int healthcheck(const char *url) {
    char host[256], port[16] = "80", path[512] = "/";
    if (strncmp(url, "http://", 7) != 0) {
        fprintf(stderr, "--healthcheck: only http:// URLs are supported\n");
        return 1;
    }
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    if (slash) snprintf(path, sizeof path, "%s", slash);
    if (hl == 0 || hl >= sizeof host) return 1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    char *colon = host[0] == '[' ? strstr(host, "]:") : strrchr(host, ':');
    if (colon) {
        snprintf(port, sizeof port, "%s", colon + (host[0] == '[' ? 2 : 1));
        *colon = host[0] == '[' ? ']' : '\0';
        if (host[0] == '[') colon[1] = '\0';
    }
    char *hostp = host;
    if (host[0] == '[') {
        hostp = host + 1;
        hostp[strcspn(hostp, "]")] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(hostp, port, &hints, &ai)) {
        fprintf(stderr, "--healthcheck: cannot resolve %s\n", hostp);
        return 1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    struct timeval tv = {5, 0};
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    freeaddrinfo(ai);
    if (!ok) {
        fprintf(stderr, "--healthcheck: cannot connect to %s:%s\n", hostp, port);
        if (fd >= 0) close(fd);
        return 1;
    }
    char req[1024], resp[64] = {0};
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, hostp);
    ssize_t got = write(fd, req, (size_t)n) == n ? read(fd, resp, sizeof resp - 1) : -1;
    close(fd);
    if (got < 12 || strncmp(resp, "HTTP/1.", 7) != 0 || strncmp(resp + 9, "200", 3) != 0) {
        fprintf(stderr, "--healthcheck: %s answered %.12s\n", url, got > 0 ? resp : "nothing");
        return 1;
    }
    return 0;
}

/* CPUs this process may use: the affinity mask, capped by a cgroup v2 CPU
 * quota (a container limited to 2 CPUs on a 64-core host gets 2 workers,
 * not 64). */
static long usable_cpus(void) {
    long n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        char quota[32] = "";
        long period = 0;
        if (fscanf(f, "%31s %ld", quota, &period) == 2 && strcmp(quota, "max") != 0 && period > 0) {
            long q = atol(quota), cap = (q + period - 1) / period;
            if (cap >= 1 && cap < n) n = cap;
        }
        fclose(f);
    }
    return n > 0 ? n : 1;
}

int main(int argc, char **argv) {
    attn_blas_reexec_if_needed(argv);
    json_object_seed(0); /* random hash seed (from /dev/urandom) before any JSON is read */
    char err[2048];
    attn_config cfg;
    if (config_load(&cfg, argc, argv, err, sizeof err)) {
        fprintf(stderr, "attention-server: %s\n", err);
        config_free(&cfg);
        return 1;
    }
    if (cfg.help) {
        config_usage(stdout);
        config_free(&cfg);
        return 0;
    }
    if (cfg.version) {
        printf("attention-server %s\n", ATTN_VERSION);
        config_free(&cfg);
        return 0;
    }
    if (cfg.healthcheck_url[0]) {
        int rc = healthcheck(cfg.healthcheck_url);
        config_free(&cfg);
        return rc;
    }
    log_init(cfg.log_format);

    /* Signals are taken by sigtimedwait in this thread only: block them
     * before any thread starts so every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP); /* re-read the models (reload.h) */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    attn_blas_info blas;
    if (attn_blas_init(&blas, err, sizeof err)) {
        log_error("BLAS self-test failed: %s", err);
        config_free(&cfg);
        return 1;
    }
    /* the engine's paths, for the start-up line and --check */
    char paths[96];
    snprintf(paths, sizeof paths, "projections on %s, row passes on %s",
             attn_gemm_nr() > 0 ? attn_gemm_kernel() : "OpenBLAS", attn_isa_name(attn_isa_now()));
    log_info("attention-server %s; BLAS: %s; kernel %s (%s); self-test max rel err %.2g; %s",
             ATTN_VERSION, blas.config, blas.corename, blas.reason, blas.selftest_max_rel_err,
             paths);

    registry *reg = registry_create();
    reloader *rl = reg ? reloader_create(reg, &cfg, argc, argv, err, sizeof err) : NULL;
    if (!rl) {
        log_error("%s", reg ? err : "out of memory");
        registry_destroy(reg);
        config_free(&cfg);
        return 1;
    }
    long threads = cfg.threads > 0 ? cfg.threads : usable_cpus();
    attn_pool *pool = NULL;
    int rc = 0;
    if (attn_pool_create((int)threads, &pool, err, sizeof err)) {
        log_error("compute pool: %s", err);
        rc = 1;
        goto out;
    }
    /* the memory budget: given, or from the container's limit (budget.h);
     * the weight sets are held twice over (their transposed copies) */
    size_t weights_bytes = registry_weights_bytes(reg);
    char why[160] = "max_memory_bytes";
    size_t mem = cfg.max_memory_bytes ? cfg.max_memory_bytes
                                      : budget_default(weights_bytes, why, sizeof why);
    budget_init(mem);
    if (cfg.check) {
        printf("ok: %d model(s), BLAS kernel %s, %s, %ld compute threads; self-test passed\n",
               registry_serving(reg), blas.corename, paths, threads);
        printf("memory budget for requests: %.1f MiB (%s)\n", (double)mem / 1048576.0, why);
        goto out;
    }
    log_info("memory budget for requests: %.1f MiB (%s)", (double)mem / 1048576.0, why);
    metrics_init(ATTN_VERSION, blas.corename);
    if (reloader_start(rl, err, sizeof err)) {
        log_error("%s", err);
        rc = 1;
        goto out;
    }
    http_server *srv = http_start(&cfg, reg, rl, pool, &blas, err, sizeof err);
    if (!srv) {
        log_error("%s", err);
        rc = 1;
        goto out;
    }
    log_info("listening on %s:%d with %ld compute threads, %ld I/O threads", cfg.host,
             http_port(srv), threads, cfg.io_threads);
    for (;;) {
        struct timespec t = {1, 0};
        int sig = sigtimedwait(&sigs, NULL, &t);
        if (sig == SIGHUP) {
            log_info("received SIGHUP: re-reading the configuration and the model directory");
            reloader_rescan(rl);
        } else if (sig == SIGTERM || sig == SIGINT) {
            log_info("received %s: draining (grace %ld ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                     cfg.shutdown_grace_ms);
            break;
        }
    }
    http_drain(srv); /* stops the reloader too */
    http_stop(srv);
    /* Every connection has ended: whatever requests reserved, they gave
     * back. Anything else is an accounting bug (the tests look for this). */
    if (budget_held())
        log_error("memory budget: %zu bytes still held after every request ended (an accounting "
                  "bug)",
                  budget_held());
    log_info("stopped"); /* (an event line: flushes pending access lines first) */
out:
    reloader_destroy(rl);
    attn_pool_destroy(pool);
    registry_destroy(reg);
    config_free(&cfg);
    return rc;
}
