/* config.h - the daemon's settings: built-in defaults, a JSON config file,
 * ATTN_* environment variables and command-line flags, in rising precedence
 * (flag > environment > file > default).
 *
 * Every setting is one row of a table in config.c that names its flag, its
 * environment variable, its config key (the flag without "--", '-' -> '_'),
 * its type and its range; the three sources are read through that table, so
 * they cannot drift apart. Weight sets add up across sources: the config
 * file's "models", then ATTN_MODELS, then each --model; a later source
 * replaces an earlier model of the same name.
 *
 *     attn_config c;
 *     if (config_load(&c, argc, argv, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
 *     ... c.port, c.models[i].path ...
 *     config_free(&c);
 */
#ifndef ATTN_CONFIG_H
#define ATTN_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "log.h"

/* Who may load and unload models through the repository API. */
typedef enum { MODEL_CONTROL_NONE, MODEL_CONTROL_EXPLICIT } model_control_mode;

typedef struct model_spec {
    char name[64];       /* API name: [A-Za-z0-9._-]{1,63} */
    char path[PATH_MAX]; /* safetensors file, resolved against the config file's folder */
    int num_heads;       /* > 0 overrides the file's metadata; 0 = from the file */
    int add_zero_attn;   /* -1 from the file, else 0/1 */
    char prefix[256];    /* tensor-name prefix, "" for none */
    bool is_default;     /* used when a request names no model */
    char origin[100];    /* where it was given, for messages: "--model", "ATTN_MODELS",
                            "FILE models[i]" */
} model_spec;

typedef struct attn_config {
    char config_path[PATH_MAX]; /* "" when none */
    char host[256];
    long port;
    long threads;    /* compute workers; 0 = number of CPUs */
    long io_threads; /* libmicrohttpd threads */
    size_t max_body_bytes;
    long max_tokens;
    long max_batch;
    long max_queue;
    size_t max_response_bytes;
    size_t max_compute_bytes;  /* engine scratch one request may use */
    size_t max_memory_bytes;   /* budget for all requests together; 0 = derived (budget.h) */
    long request_timeout_ms;   /* longest wait in the compute queue */
    long batch_max_requests;   /* requests computed together from the queue (1 = off) */
    long batch_max_tokens;     /* their tokens together */
    long batch_delay_us;       /* wait this long for more (0 = never) */
    long body_timeout_ms;      /* longest time to receive headers + body */
    long connection_timeout_s; /* idle keep-alive connections are closed after this */
    long max_connections;
    long shutdown_grace_ms;
    char api_key[256]; /* "" = no key required */
    log_format log_format;
    bool no_ui;
    char cors_allow_origin[256]; /* "" = no CORS headers */
    size_t compress_min_bytes;   /* compression policy: see compress.h */
    size_t compress_always_bytes;
    long compress_budget_pct;
    long compress_level;
    char model_dir[PATH_MAX];         /* model repository: NAME.safetensors files; "" = none */
    long model_poll_s;                /* look for changed weight files every N s; 0 = off */
    model_control_mode model_control; /* explicit: the repository API may load and unload */
    model_spec *models;               /* nmodels entries, malloc'd */
    int nmodels;
    /* actions */
    bool check, version, help;
    char healthcheck_url[1024];
} attn_config;

/* Fill c from defaults, the config file (--config / ATTN_CONFIG), the
 * environment and argv. Returns 0, or -1 with err naming the source (file,
 * variable or flag), the key and what was expected. c must be freed with
 * config_free in both cases. Not thread-safe (reads the environment). */
int config_load(attn_config *c, int argc, char **argv, char *err, size_t errlen);
void config_free(attn_config *c);
void config_usage(FILE *out);

/* Whether name is a valid model name: 1-63 characters of A-Z a-z 0-9 . _ - */
bool config_model_name_valid(const char *name);

/* Parse "NAME=PATH[:HEADS][:prefix=PREFIX][:add_zero_attn=true|false]" (the
 * options in any order, each at most once) into m (other fields
 * defaulted). 0 or -1 + err. */
int config_parse_model_arg(const char *arg, model_spec *m, char *err, size_t errlen);

#endif
