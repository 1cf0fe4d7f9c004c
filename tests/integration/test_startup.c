/* test_startup.c - bad weight files and bad configuration stop the daemon
 * before it listens: exit status 1 and a message naming the file, tensor or
 * key; --check reports the same, and exits 0 on good input. */
#include <stdint.h>
#include <sys/wait.h>

#include "check.h"
#include "harness.h"

static char dir[] = "/tmp/attn-startup-XXXXXX";

/* Run the daemon with args to completion (it must not listen: --port 0 on
 * loopback, and a 60 s limit); returns the exit status, stderr in out. */
static int run(const char *const *args, char *out, size_t n) {
    const char *bin = getenv("ATTN_SERVER_BIN");
    if (!bin) bin = "bin/attention-server";
    char logp[600];
    snprintf(logp, sizeof logp, "%s/stderr", dir);
    const char *argv[40] = {bin};
    int k = 1;
    for (int i = 0; args[i] && k < 34; i++) argv[k++] = args[i];
    argv[k++] = "--host";
    argv[k++] = "127.0.0.1";
    argv[k++] = "--port";
    argv[k++] = "0";
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(logp, "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    double until = h_now() + 60;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (h_now() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            snprintf(out, n, "still running after 60 s (it should have refused to start)");
            return -1;
        }
        usleep(10000);
    }
    FILE *f = fopen(logp, "r");
    size_t got = f ? fread(out, 1, n - 1, f) : 0;
    out[got] = '\0';
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *write_bytes(const char *name, const void *p, size_t len) {
    static char path[8][600];
    static int k;
    char *out = path[k++ % 8];
    snprintf(out, 600, "%s/%s", dir, name);
    FILE *f = fopen(out, "wb");
    fwrite(p, 1, len, f);
    fclose(f);
    return out;
}

static void expect_refusal(const char *what, const char *const *args, const char *n1, const char *n2) {
    char out[8192];
    int rc = run(args, out, sizeof out);
    CHECK_MSG(rc == 1, "%s: exit %d (want 1): %.400s", what, rc, out);
    CHECK_MSG(strstr(out, n1) != NULL, "%s: the message does not name '%s': %.400s", what, n1, out);
    if (n2) CHECK_MSG(strstr(out, n2) != NULL, "%s: the message does not name '%s': %.400s", what, n2, out);
    CHECK_MSG(strstr(out, "listening on") == NULL, "%s: it listened", what);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    /* the demo file's bytes, to damage */
    FILE *f = fopen("config/weights/demo.safetensors", "rb");
    if (!f) {
        CHECK_MSG(0, "config/weights/demo.safetensors missing");
        return check_exit();
    }
    static unsigned char demo[1 << 20];
    size_t n = fread(demo, 1, sizeof demo, f);
    fclose(f);
    uint64_t hlen = 0;
    memcpy(&hlen, demo, 8);
    char m[700], out[8192];

    /* good input: --check passes */
    const char *good[] = {"--model", "demo=config/weights/demo.safetensors", "--check", NULL};
    CHECK_INT_EQ(run(good, out, sizeof out), 0);

    const char *p = write_bytes("truncated.safetensors", demo, n - 100);
    snprintf(m, sizeof m, "demo=%s", p);
    const char *a1[] = {"--model", m, NULL};
    expect_refusal("truncated file", a1, "truncated.safetensors", NULL);
    const char *a1c[] = {"--model", m, "--check", NULL};
    expect_refusal("truncated file, --check", a1c, "truncated.safetensors", NULL);

    static unsigned char buf[1 << 20];
    memcpy(buf, demo, n);
    memcpy(buf + n, "xx", 2);
    p = write_bytes("trailing.safetensors", buf, n + 2);
    snprintf(m, sizeof m, "demo=%s", p);
    const char *a2[] = {"--model", m, NULL};
    expect_refusal("trailing bytes", a2, "trailing.safetensors", NULL);

    memcpy(buf, demo, n);
    uint64_t huge = (uint64_t)1 << 40;
    memcpy(buf, &huge, 8);
    p = write_bytes("huge-header.safetensors", buf, n);
    snprintf(m, sizeof m, "demo=%s", p);
    const char *a3[] = {"--model", m, NULL};
    expect_refusal("huge header length", a3, "huge-header.safetensors", NULL);

    /* a NaN in out_proj.bias: its last 4 bytes are the file's last 4 only if
     * it is the last tensor, so find the tensor's offsets in the header */
    memcpy(buf, demo, n);
    char *hdr = (char *)buf + 8;
    char *t = strstr(hdr, "\"in_proj_weight\"");
    char *o = t ? strstr(t, "data_offsets") : NULL;
    if (o && (size_t)(o - hdr) < hlen) {
        unsigned long long b0 = strtoull(strchr(o, '[') + 1, NULL, 10);
        uint32_t nan = 0x7fc00000u;
        memcpy(buf + 8 + hlen + b0 + 4 * 10, &nan, 4);
        p = write_bytes("nan.safetensors", buf, n);
        snprintf(m, sizeof m, "demo=%s", p);
        const char *a4[] = {"--model", m, NULL};
        expect_refusal("NaN weight", a4, "nan.safetensors", "in_proj_weight");
    } else {
        CHECK_MSG(0, "in_proj_weight not found in the demo header");
    }

    /* a head count that disagrees with the file's __metadata__ (4) */
    const char *a5[] = {"--model", "demo=config/weights/demo.safetensors:2", NULL};
    expect_refusal("heads disagreeing with the file", a5, "demo.safetensors",
                   "num_heads: 2 given (config num_heads or --model NAME=PATH:HEADS) but the file's "
                   "__metadata__[\"num_heads\"] is 4");
    const char *a5b[] = {"--model", "demo=config/weights/demo.safetensors:add_zero_attn=true", NULL};
    expect_refusal("add_zero_attn disagreeing with the file", a5b, "demo.safetensors",
                   "__metadata__[\"add_zero_attn\"] is \"false\"");
    /* a prefix on the command line; the message lists the layers the file holds */
    const char *a5c[] = {"--model", "demo=config/weights/demo.safetensors:prefix=encoder.", NULL};
    expect_refusal("prefix with no layer under it", a5c, "demo.safetensors",
                   "the file holds 1 attention layer, choose one with a prefix");
    /* a name given twice */
    const char *a5d[] = {"--model", "demo=config/weights/demo.safetensors", "--model",
                         "demo=config/weights/demo.safetensors:4", NULL};
    expect_refusal("a name given twice", a5d, "model 'demo' is given twice",
                   "by --model (config/weights/demo.safetensors) and by --model");
    const char *a6[] = {"--model", "demo=/nonexistent/w.safetensors", NULL};
    expect_refusal("missing file", a6, "/nonexistent/w.safetensors", NULL);
    static const char badcfg[] = "{\"port\": 8080, \"max_queue\": 0}";
    const char *cfg = write_bytes("bad.json", badcfg, sizeof badcfg - 1);
    const char *a7[] = {"--config", cfg, "--model", "demo=config/weights/demo.safetensors", NULL};
    expect_refusal("bad config value", a7, "bad.json", "max_queue");
    const char *a8[] = {"--max-tokens", "lots", "--model", "demo=config/weights/demo.safetensors", NULL};
    expect_refusal("bad flag value", a8, "--max-tokens", NULL);
    const char *a9[] = {"--model", "demo=config/weights/demo.safetensors:4", "--model", "x=config/weights/demo.safetensors",
                        "--config", "/nonexistent/c.json", NULL};
    expect_refusal("missing config file", a9, "/nonexistent/c.json", NULL);
    return check_exit();
}
