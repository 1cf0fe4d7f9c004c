/* test_config.c - settings precedence (flag > environment > file > default),
 * config-file validation and model specs. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "config.h"

static char dir[] = "/tmp/attn-cfg-XXXXXX";

static const char *write_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void clear_env(void) {
    const char *vars[] = {"ATTN_CONFIG", "ATTN_PORT", "ATTN_HOST", "ATTN_MODELS", "ATTN_API_KEY",
                          "ATTN_MAX_TOKENS", "ATTN_LOG_FORMAT", "ATTN_NO_UI", "ATTN_THREADS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static int load(attn_config *c, char *err, const char *const *args) {
    char *argv[32] = {"attention-server"};
    int argc = 1;
    for (; args && args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    return config_load(c, argc, argv, err, 512);
}

int main(void) {
    char err[512];
    attn_config c;
    if (!mkdtemp(dir)) return 1;
    clear_env();

    /* defaults */
    CHECK_INT_EQ(load(&c, err, NULL), 0);
    CHECK_INT_EQ(c.port, 8080);
    CHECK_STR_EQ(c.host, "0.0.0.0");
    CHECK_INT_EQ(c.max_tokens, 8192);
    CHECK_INT_EQ(c.max_batch, 64);
    CHECK_INT_EQ(c.max_queue, 256);
    CHECK_INT_EQ(c.max_body_bytes, 64u << 20);
    CHECK_INT_EQ(c.max_response_bytes, 256u << 20);
    CHECK_INT_EQ(c.request_timeout_ms, 30000);
    CHECK_INT_EQ(c.shutdown_grace_ms, 25000);
    CHECK_INT_EQ(c.log_format, LOG_TEXT);
    CHECK_INT_EQ(c.nmodels, 0);
    config_free(&c);

    /* file < env < flag, for one setting; each source alone for others */
    const char *cfg = write_file("a.json",
                                 "{\"port\": 9000, \"max_tokens\": 100, \"log_format\": \"json\",\n"
                                 " \"models\": [{\"name\": \"m1\", \"path\": \"w/m1.safetensors\", "
                                 "\"num_heads\": 2, \"prefix\": \"enc.\", \"default\": true}]}");
    const char *a1[] = {"--config", cfg, NULL};
    CHECK_INT_EQ(load(&c, err, a1), 0);
    CHECK_INT_EQ(c.port, 9000);
    CHECK_INT_EQ(c.max_tokens, 100);
    CHECK_INT_EQ(c.log_format, LOG_JSON);
    CHECK_INT_EQ(c.nmodels, 1);
    char want[600];
    snprintf(want, sizeof want, "%s/w/m1.safetensors", dir);
    if (c.nmodels == 1) {
        CHECK_STR_EQ(c.models[0].path, want); /* relative to the config file */
        CHECK_INT_EQ(c.models[0].num_heads, 2);
        CHECK_STR_EQ(c.models[0].prefix, "enc.");
        CHECK(c.models[0].is_default);
    }
    config_free(&c);
    setenv("ATTN_PORT", "9100", 1);
    setenv("ATTN_CONFIG", cfg, 1);
    CHECK_INT_EQ(load(&c, err, NULL), 0);
    CHECK_INT_EQ(c.port, 9100);      /* env beats file */
    CHECK_INT_EQ(c.max_tokens, 100); /* file beats default */
    config_free(&c);
    const char *a2[] = {"--port", "9200", "--max-tokens=50", NULL};
    CHECK_INT_EQ(load(&c, err, a2), 0);
    CHECK_INT_EQ(c.port, 9200); /* flag beats env */
    CHECK_INT_EQ(c.max_tokens, 50);
    config_free(&c);

    /* models add up; a name given twice, by any two sources, is an error */
    setenv("ATTN_MODELS", "m2=/x/m2.safetensors:8,m4=/y/m4.safetensors", 1);
    const char *a3[] = {"--model", "m3=/z/m3.safetensors", NULL};
    CHECK_INT_EQ(load(&c, err, a3), 0);
    CHECK_INT_EQ(c.nmodels, 4);
    if (c.nmodels == 4) {
        CHECK_STR_EQ(c.models[0].name, "m1"); /* the config file's */
        CHECK_STR_EQ(c.models[1].name, "m2");
        CHECK_INT_EQ(c.models[1].num_heads, 8);
        CHECK_STR_EQ(c.models[1].origin, "ATTN_MODELS");
        CHECK_STR_EQ(c.models[3].path, "/z/m3.safetensors");
    }
    config_free(&c);
    setenv("ATTN_MODELS", "m1=/y/m1.safetensors", 1);
    CHECK_INT_EQ(load(&c, err, NULL), -1); /* m1: the config file's and ATTN_MODELS's */
    CHECK_STR_CONTAINS(err, "model 'm1' is given twice: by ");
    CHECK_STR_CONTAINS(err, "models[0]");
    CHECK_STR_CONTAINS(err, "by ATTN_MODELS (/y/m1.safetensors)");
    config_free(&c);
    setenv("ATTN_MODELS", "m2=/x/m2.safetensors", 1);
    const char *a3b[] = {"--model", "m2=/z/other.safetensors", NULL};
    CHECK_INT_EQ(load(&c, err, a3b), -1);
    CHECK_STR_CONTAINS(err, "model 'm2' is given twice: by ATTN_MODELS (/x/m2.safetensors) and by "
                            "--model (/z/other.safetensors)");
    config_free(&c);
    const char *a3c[] = {"--model", "m5=/a", "--model", "m5=/b", NULL};
    CHECK_INT_EQ(load(&c, err, a3c), -1);
    CHECK_STR_CONTAINS(err, "model 'm5' is given twice: by --model (/a) and by --model (/b)");
    config_free(&c);
    clear_env();

    /* the API key: a file for the flag and the config, the key itself in the environment */
    const char *keyf = write_file("key", "k-123\n");
    const char *a4[] = {"--api-key-file", keyf, NULL};
    CHECK_INT_EQ(load(&c, err, a4), 0);
    CHECK_STR_EQ(c.api_key, "k-123");
    config_free(&c);
    setenv("ATTN_API_KEY", "from-env", 1);
    CHECK_INT_EQ(load(&c, err, NULL), 0);
    CHECK_STR_EQ(c.api_key, "from-env");
    config_free(&c);
    clear_env();

    /* errors name the source and the key */
    const char *bad1 = write_file("b1.json", "{\"port\": 8080, \"prot\": 1}");
    const char *ab1[] = {"--config", bad1, NULL};
    CHECK_INT_EQ(load(&c, err, ab1), -1);
    CHECK_STR_CONTAINS(err, "unknown key 'prot'");
    config_free(&c);
    const char *bad2 = write_file("b2.json", "{\"max_tokens\": \"many\"}");
    const char *ab2[] = {"--config", bad2, NULL};
    CHECK_INT_EQ(load(&c, err, ab2), -1);
    CHECK_STR_CONTAINS(err, "max_tokens: expected an integer");
    config_free(&c);
    const char *bad3 = write_file("b3.json", "{\"models\": [{\"name\": \"x\", \"path\": \"p\", \"heads\": 2}]}");
    const char *ab3[] = {"--config", bad3, NULL};
    CHECK_INT_EQ(load(&c, err, ab3), -1);
    CHECK_STR_CONTAINS(err, "models[0]: unknown key 'heads'");
    config_free(&c);
    const char *bad4 = write_file("b4.json", "{\"port\": 1,}");
    const char *ab4[] = {"--config", bad4, NULL};
    CHECK_INT_EQ(load(&c, err, ab4), -1);
    CHECK_STR_CONTAINS(err, "b4.json");
    config_free(&c);
    /* a type error echoes the key and the bad value */
    const char *bad5 = write_file("b5.json", "{\"port\": \"eighty\"}");
    const char *ab5b[] = {"--config", bad5, NULL};
    CHECK_INT_EQ(load(&c, err, ab5b), -1);
    CHECK_STR_CONTAINS(err, "port: expected an integer, got \"eighty\"");
    config_free(&c);
    const char *bad6 = write_file("b6.json", "{\"models\": [{\"name\": \"m\", \"path\": \"p\", "
                                             "\"num_heads\": 0}]}");
    const char *ab6d[] = {"--config", bad6, NULL};
    CHECK_INT_EQ(load(&c, err, ab6d), -1);
    CHECK_STR_CONTAINS(err, "models[0].num_heads: expected an integer from 1 to 65536, got 0");
    config_free(&c);
    setenv("ATTN_PORT", "70000", 1);
    CHECK_INT_EQ(load(&c, err, NULL), -1);
    CHECK_STR_CONTAINS(err, "ATTN_PORT: expected an integer from 0 to 65535");
    config_free(&c);
    clear_env();
    const char *ab5[] = {"--threads", "-2", NULL};
    CHECK_INT_EQ(load(&c, err, ab5), -1);
    CHECK_STR_CONTAINS(err, "--threads");
    config_free(&c);
    const char *ab6[] = {"--bogus", "1", NULL};
    CHECK_INT_EQ(load(&c, err, ab6), -1);
    CHECK_STR_CONTAINS(err, "unknown flag '--bogus'");
    config_free(&c);
    const char *ab6b[] = {"--bogus", NULL}; /* alone: unknown, not "missing value" */
    CHECK_INT_EQ(load(&c, err, ab6b), -1);
    CHECK_STR_CONTAINS(err, "unknown flag '--bogus'");
    config_free(&c);
    const char *ab6c[] = {"-h", NULL};
    CHECK_INT_EQ(load(&c, err, ab6c), 0);
    CHECK(c.help);
    config_free(&c);
    const char *ab7[] = {"--model", "no-equals-sign", NULL};
    CHECK_INT_EQ(load(&c, err, ab7), -1);
    CHECK_STR_CONTAINS(err, "NAME=PATH");
    config_free(&c);
    const char *ab8[] = {"--log-format", "xml", NULL};
    CHECK_INT_EQ(load(&c, err, ab8), -1);
    CHECK_STR_CONTAINS(err, "text or json");
    config_free(&c);
    const char *ab9[] = {"--api-key-file", "/nonexistent/key", NULL};
    CHECK_INT_EQ(load(&c, err, ab9), -1);
    CHECK_STR_CONTAINS(err, "/nonexistent/key");
    config_free(&c);

    /* the model lifecycle settings: model_dir relative to the config file,
     * model_control's two values, model_poll_s's range */
    const char *lc = write_file("lc.json", "{\"model_dir\": \"models\", \"model_poll_s\": 5, "
                                           "\"model_control\": \"explicit\"}");
    const char *lc1[] = {"--config", lc, NULL};
    CHECK_INT_EQ(load(&c, err, lc1), 0);
    char want_dir[600];
    snprintf(want_dir, sizeof want_dir, "%s/models", dir);
    CHECK_STR_EQ(c.model_dir, want_dir);
    CHECK_INT_EQ(c.model_poll_s, 5);
    CHECK_INT_EQ(c.model_control, MODEL_CONTROL_EXPLICIT);
    config_free(&c);
    const char *lc2[] = {"--config", lc, "--model-control", "none", "--model-dir", "/srv/m", NULL};
    CHECK_INT_EQ(load(&c, err, lc2), 0);
    CHECK_INT_EQ(c.model_control, MODEL_CONTROL_NONE);
    CHECK_STR_EQ(c.model_dir, "/srv/m");
    config_free(&c);
    const char *lc3[] = {"--model-control", "poll", NULL};
    CHECK_INT_EQ(load(&c, err, lc3), -1);
    CHECK_STR_CONTAINS(err, "--model-control: expected none or explicit, got 'poll'");
    config_free(&c);
    setenv("ATTN_MODEL_POLL_S", "-1", 1);
    CHECK_INT_EQ(load(&c, err, NULL), -1);
    CHECK_STR_CONTAINS(err, "ATTN_MODEL_POLL_S: expected an integer from 0 to 86400");
    unsetenv("ATTN_MODEL_POLL_S");
    config_free(&c);

    /* NAME=PATH:HEADS */
    model_spec m;
    CHECK_INT_EQ(config_parse_model_arg("demo=/a:b/demo.safetensors:4", &m, err, sizeof err), 0);
    CHECK_STR_EQ(m.path, "/a:b/demo.safetensors");
    CHECK_INT_EQ(m.num_heads, 4);
    CHECK_INT_EQ(config_parse_model_arg("bad name=/p", &m, err, sizeof err), -1);
    /* the options after the path, any order, each once */
    CHECK_INT_EQ(config_parse_model_arg("b=/w/m.safetensors:12:prefix=bert.encoder.layer.3.", &m,
                                        err, sizeof err),
                 0);
    CHECK_STR_EQ(m.path, "/w/m.safetensors");
    CHECK_INT_EQ(m.num_heads, 12);
    CHECK_STR_EQ(m.prefix, "bert.encoder.layer.3.");
    CHECK_INT_EQ(m.add_zero_attn, -1);
    CHECK_INT_EQ(config_parse_model_arg("b=/x:y/m.safetensors:add_zero_attn=true:prefix=a.b.:6", &m,
                                        err, sizeof err),
                 0);
    CHECK_STR_EQ(m.path, "/x:y/m.safetensors");
    CHECK_INT_EQ(m.num_heads, 6);
    CHECK_STR_EQ(m.prefix, "a.b.");
    CHECK_INT_EQ(m.add_zero_attn, 1);
    CHECK_INT_EQ(config_parse_model_arg("b=/m.safetensors:prefix=", &m, err, sizeof err), -1);
    CHECK_STR_CONTAINS(err, "prefix= must be 1 to 255 characters");
    CHECK_INT_EQ(config_parse_model_arg("b=/m.safetensors:4:8", &m, err, sizeof err), -1);
    CHECK_STR_CONTAINS(err, "HEADS given twice");
    CHECK_INT_EQ(config_parse_model_arg("b=/m.safetensors:add_zero_attn=yes", &m, err, sizeof err),
                 -1);
    CHECK_STR_CONTAINS(err, "add_zero_attn= must be true or false, got 'yes'");
    CHECK_INT_EQ(config_parse_model_arg("b=/m.safetensors:0", &m, err, sizeof err), -1);
    CHECK_STR_CONTAINS(err, "HEADS must be from 1 to 65536, got '0'");
    CHECK_INT_EQ(config_parse_model_arg("b=/m.safetensors:99999999999", &m, err, sizeof err), -1);
    return check_exit();
}
