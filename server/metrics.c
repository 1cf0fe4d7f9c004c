/* metrics.c - see metrics.h. One mutex guards the request-count table and
 * the histograms; scrapes and updates are short, so contention is low. */
#include "metrics.h"

#include "budget.h"
#include "hugemem.h"
#include "gemm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define METRICS_MAX_SERIES 512 /* (route, model, status) triples kept */
#define METRICS_MAX_MODELS 64  /* models with latency histograms of their own */

typedef struct series {
    char route[32];
    char model[64];
    int status;
    unsigned long long count;
} series;

static const double hist_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25,   0.5,   1,      2.5,   5,    10,    30};
#define NBOUNDS (sizeof hist_bounds / sizeof hist_bounds[0])

typedef struct hist {
    unsigned long long buckets[NBOUNDS]; /* non-cumulative; summed when rendered */
    unsigned long long count;
    double sum;
} hist;

/* Each histogram's name and help, by metrics_hist. */
static const char *const hist_names[MH_COUNT] = {
    [MH_RECEIVE] = "attention_server_receive_seconds",
    [MH_DECODE] = "attention_server_decode_seconds",
    [MH_QUEUE] = "attention_server_queue_wait_seconds",
    [MH_COMPUTE] = "attention_server_compute_seconds",
    [MH_ENCODE] = "attention_server_encode_seconds",
    [MH_SEND] = "attention_server_send_seconds",
    [MH_TOTAL] = "attention_server_request_duration_seconds",
};
static const char *const hist_help[MH_COUNT] = {
    [MH_RECEIVE] =
        "Time a request body took to arrive, from the end of its headers to its last byte.",
    [MH_DECODE] = "Time spent inflating, parsing and validating /attend bodies.",
    [MH_QUEUE] = "Time /attend requests waited in the compute queue.",
    [MH_COMPUTE] = "Time spent computing attention for /attend requests.",
    [MH_ENCODE] = "Time spent encoding /attend responses (JSON or base64, gzip).",
    [MH_SEND] = "Time an answer took to send, from queued to its last byte handed to the kernel.",
    [MH_TOTAL] = "Total time from request arrival to the answer's last byte sent, all routes.",
};

/* One model's inference latencies. */
typedef struct model_hists {
    char model[64];
    hist total, compute;
} model_hists;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static series table[METRICS_MAX_SERIES];
static size_t nseries;
static unsigned long long dropped_series;
static hist hists[MH_COUNT];
static model_hists by_model[METRICS_MAX_MODELS];
static int nmodels;
static unsigned long long dropped_models;
static atomic_ullong config_reloads[2]; /* ok, failed */
static atomic_ullong bytes_in_total, bytes_out_total;
static atomic_long in_flight;
static const char *const refusal_causes[] = {"body", "inflate", "decode"};
static atomic_ullong refusals[3];
static char build_version[32], build_blas[32];

/* Batches the compute queue ran (one request alone is a batch of 1): a
 * histogram of their requests and one of their tokens. */
static const double batch_req_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
static const double batch_tok_bounds[] = {16, 64, 256, 1024, 4096, 16384, 65536, 262144};
#define NBREQ (sizeof batch_req_bounds / sizeof batch_req_bounds[0])
#define NBTOK (sizeof batch_tok_bounds / sizeof batch_tok_bounds[0])
typedef struct count_hist {
    unsigned long long buckets[16]; /* non-cumulative, as hist */
    unsigned long long count;
    double sum;
} count_hist;
static count_hist batch_requests, batch_tokens;

static void count_observe(count_hist *h, const double *bounds, size_t nb, double v) {
    size_t b = 0;
    while (b < nb && v > bounds[b]) b++;
    if (b < nb) h->buckets[b]++;
    h->count++;
    h->sum += v;
}

static void count_render(buf *out, const char *name, const char *help, const count_hist *h,
                         const double *bounds, size_t nb) {
    buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long cum = 0;
    for (size_t b = 0; b < nb; b++) {
        cum += h->buckets[b];
        buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[b], cum);
    }
    buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, h->count,
               name, h->sum, name, h->count);
}

void metrics_batch(int requests, long tokens) {
    pthread_mutex_lock(&mu);
    count_observe(&batch_requests, batch_req_bounds, NBREQ, requests);
    count_observe(&batch_tokens, batch_tok_bounds, NBTOK, (double)tokens);
    pthread_mutex_unlock(&mu);
}

void metrics_init(const char *version, const char *blas_core) {
    snprintf(build_version, sizeof build_version, "%s", version);
    snprintf(build_blas, sizeof build_blas, "%s", blas_core);
}

void metrics_request(const char *route, const char *model, int status, size_t bytes_in,
                     size_t bytes_out) {
    atomic_fetch_add(&bytes_in_total, bytes_in);
    atomic_fetch_add(&bytes_out_total, bytes_out);
    pthread_mutex_lock(&mu);
    size_t i;
    for (i = 0; i < nseries; i++)
        if (table[i].status == status && strcmp(table[i].route, route) == 0 &&
            strcmp(table[i].model, model) == 0)
            break;
    if (i == nseries) {
        if (nseries == METRICS_MAX_SERIES) {
            dropped_series++;
            pthread_mutex_unlock(&mu);
            return;
        }
        snprintf(table[i].route, sizeof table[i].route, "%s", route);
        snprintf(table[i].model, sizeof table[i].model, "%s", model);
        table[i].status = status;
        nseries++;
    }
    table[i].count++;
    pthread_mutex_unlock(&mu);
}

/* Count one observation. Lock held. */
static void hist_add(hist *h, double seconds) {
    size_t b = 0;
    while (b < NBOUNDS && seconds > hist_bounds[b]) b++;
    if (b < NBOUNDS) h->buckets[b]++;
    h->count++;
    h->sum += seconds;
}

/* One histogram's lines; labels ("model=\"x\"") may be "". Lock held. */
static void hist_render(buf *out, const char *name, const char *labels, const hist *h) {
    const char *sep = labels[0] ? "," : "";
    unsigned long long cum = 0;
    for (size_t b = 0; b < NBOUNDS; b++) {
        cum += h->buckets[b];
        buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, hist_bounds[b], cum);
    }
    buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, h->count);
    if (labels[0])
        buf_printf(out, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, labels, h->sum, name, labels,
                   h->count);
    else
        buf_printf(out, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name, h->count);
}

void metrics_observe(metrics_hist h, double seconds) {
    if ((unsigned)h >= MH_COUNT) return;
    pthread_mutex_lock(&mu);
    hist_add(&hists[h], seconds);
    pthread_mutex_unlock(&mu);
}

void metrics_observe_model(const char *model, double total_s, double compute_s) {
    pthread_mutex_lock(&mu);
    model_hists *m = NULL;
    for (int i = 0; i < nmodels && !m; i++)
        if (!strcmp(by_model[i].model, model)) m = &by_model[i];
    if (!m && nmodels < METRICS_MAX_MODELS) {
        m = &by_model[nmodels++];
        snprintf(m->model, sizeof m->model, "%s", model);
    }
    if (m) {
        hist_add(&m->total, total_s);
        hist_add(&m->compute, compute_s);
    } else {
        dropped_models++;
    }
    pthread_mutex_unlock(&mu);
}

void metrics_config_reload(bool ok) {
    atomic_fetch_add(&config_reloads[ok ? 0 : 1], 1);
}

void metrics_budget_refusal(const char *cause) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(cause, refusal_causes[i])) atomic_fetch_add(&refusals[i], 1);
}

void metrics_in_flight_add(int delta) {
    atomic_fetch_add(&in_flight, delta);
}
long metrics_in_flight(void) {
    return atomic_load(&in_flight);
}

void metrics_render(buf *out, long queue_depth, long models_loaded, int ready) {
    buf_puts(out, "# HELP attention_server_requests_total HTTP requests answered, by route, "
                  "model and status.\n# TYPE attention_server_requests_total counter\n");
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nseries; i++)
        buf_printf(out,
                   "attention_server_requests_total{route=\"%s\",model=\"%s\",status=\"%d\"} "
                   "%llu\n",
                   table[i].route, table[i].model, table[i].status, table[i].count);
    buf_printf(out,
               "# HELP attention_server_metrics_series_dropped_total Request counts not "
               "recorded because the series table was full.\n"
               "# TYPE attention_server_metrics_series_dropped_total counter\n"
               "attention_server_metrics_series_dropped_total %llu\n",
               dropped_series);
    for (int h = 0; h < MH_COUNT; h++) {
        buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", hist_names[h], hist_help[h],
                   hist_names[h]);
        hist_render(out, hist_names[h], "", &hists[h]);
    }
    count_render(out, "attention_server_batch_requests",
                 "Requests per engine pass of the compute queue (1: a request alone; more: "
                 "waiting requests for one model computed together).",
                 &batch_requests, batch_req_bounds, NBREQ);
    count_render(out, "attention_server_batch_tokens",
                 "Tokens per engine pass of the compute queue, all its requests together.",
                 &batch_tokens, batch_tok_bounds, NBTOK);
    static const char *const model_hist[2][2] = {
        {"attention_server_model_request_duration_seconds",
         "Total time of inference requests (/attend and v2 infer), by model."},
        {"attention_server_model_compute_seconds", "Time spent computing attention, by model."}};
    for (int k = 0; k < 2; k++) {
        buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", model_hist[k][0], model_hist[k][1],
                   model_hist[k][0]);
        for (int i = 0; i < nmodels; i++) {
            char labels[96];
            snprintf(labels, sizeof labels, "model=\"%.63s\"", by_model[i].model);
            hist_render(out, model_hist[k][0], labels,
                        k ? &by_model[i].compute : &by_model[i].total);
        }
    }
    buf_printf(out,
               "# HELP attention_server_model_histograms_dropped_total Requests not in the "
               "by-model histograms because %d models had them already.\n"
               "# TYPE attention_server_model_histograms_dropped_total counter\n"
               "attention_server_model_histograms_dropped_total %llu\n",
               METRICS_MAX_MODELS, dropped_models);
    pthread_mutex_unlock(&mu);
    buf_printf(out,
               "# HELP attention_server_config_reloads_total Re-readings of the configuration and "
               "the model directory (SIGHUP, poll), by result: failed when the configuration "
               "could not be read (every model then serves on as it was).\n"
               "# TYPE attention_server_config_reloads_total counter\n"
               "attention_server_config_reloads_total{result=\"ok\"} %llu\n"
               "attention_server_config_reloads_total{result=\"failed\"} %llu\n",
               (unsigned long long)atomic_load(&config_reloads[0]),
               (unsigned long long)atomic_load(&config_reloads[1]));
    buf_printf(out,
               "# HELP attention_server_in_flight_requests Requests being received, queued, "
               "computed or sent.\n# TYPE attention_server_in_flight_requests gauge\n"
               "attention_server_in_flight_requests %ld\n"
               "# HELP attention_server_queue_depth Requests waiting for a compute slot.\n"
               "# TYPE attention_server_queue_depth gauge\nattention_server_queue_depth %ld\n"
               "# HELP attention_server_models_loaded Weight sets loaded.\n"
               "# TYPE attention_server_models_loaded gauge\n"
               "attention_server_models_loaded %ld\n"
               "# HELP attention_server_ready 1 when /readyz answers 200.\n"
               "# TYPE attention_server_ready gauge\nattention_server_ready %d\n"
               "# HELP attention_server_request_bytes_total Request body bytes received.\n"
               "# TYPE attention_server_request_bytes_total counter\n"
               "attention_server_request_bytes_total %llu\n"
               "# HELP attention_server_response_bytes_total Response body bytes sent.\n"
               "# TYPE attention_server_response_bytes_total counter\n"
               "attention_server_response_bytes_total %llu\n"
               "# HELP attention_server_build_info Version, OpenBLAS kernel and the engine's own "
               "matrix-product kernel (none: OpenBLAS does the products).\n"
               "# TYPE attention_server_build_info gauge\n"
               "attention_server_build_info{version=\"%s\",blas_core=\"%s\",gemm_kernel=\"%s\"} "
               "1\n",
               metrics_in_flight(), queue_depth, models_loaded, ready,
               (unsigned long long)atomic_load(&bytes_in_total),
               (unsigned long long)atomic_load(&bytes_out_total), build_version, build_blas,
               attn_gemm_kernel());
    buf_printf(out,
               "# HELP attention_server_memory_budget_bytes The memory all requests may hold "
               "together (max_memory_bytes).\n# TYPE attention_server_memory_budget_bytes gauge\n"
               "attention_server_memory_budget_bytes %zu\n"
               "# HELP attention_server_memory_held_bytes Memory requests hold now: bodies, "
               "inputs, working memory, outputs and answers not yet read.\n"
               "# TYPE attention_server_memory_held_bytes gauge\n"
               "attention_server_memory_held_bytes %zu\n"
               "# HELP attention_server_memory_spare_bytes Request-sized blocks kept for the next "
               "of the same size (the engine's scratch, bodies, outputs; at most %d), held against "
               "the budget too (given up to any request that needs the room; each freed a second "
               "after it was last kept).\n"
               "# TYPE attention_server_memory_spare_bytes gauge\n"
               "attention_server_memory_spare_bytes %zu\n"
               "# HELP attention_server_memory_refusals_total Requests refused because the "
               "memory budget was full, by what they would have held.\n"
               "# TYPE attention_server_memory_refusals_total counter\n",
               budget_limit(), budget_held(), MEM_SPARES, mem_reuse_spare());
    for (int i = 0; i < 3; i++)
        buf_printf(out, "attention_server_memory_refusals_total{cause=\"%s\"} %llu\n",
                   refusal_causes[i], (unsigned long long)atomic_load(&refusals[i]));
}
