/* test_blas.c - kernel choice, re-exec and the sgemm self-test of core/blas.c.
 *
 * The re-exec is tested for real: a forked child pretends OpenBLAS loaded
 * "Prescott" and re-executes this binary with --reexec-child, which then
 * checks that the environment, the loaded kernel and attn_blas_init's
 * reason say what happened, and that a second re-exec is refused.
 */
#include <stdlib.h>
#include <strings.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "blas.h"
#include "check.h"

char *openblas_get_corename(void);
char *openblas_get_config(void);

static void clear_env(void) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("ATTN_BLAS_REEXEC");
}

static void test_cpu_best(void) {
    const char *best = attn_blas_cpu_best();
    CHECK(best != NULL);
    /* Cross-check against GCC's own cpuid reading (which also asks the OS
     * through xgetbv whether it saves the wider registers). */
    __builtin_cpu_init();
    const char *want = "";
    if (__builtin_cpu_supports("avx")) want = "Sandybridge";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) want = "Haswell";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        want = "SkylakeX";
    CHECK_STR_EQ(best, want);
    CHECK_STR_EQ(attn_blas_cpu_best(), best); /* stable */
}

static void test_should_switch(void) {
    static const struct {
        const char *loaded, *best;
        int want;
    } cases[] = {
        {"Prescott", "SkylakeX", 1},    /* the Xeon case this exists for */
        {"Prescott", "Haswell", 1},     {"Prescott", "Sandybridge", 1},
        {"Core2", "Haswell", 1},        {"Nehalem", "SkylakeX", 1},
        {"Atom", "Sandybridge", 1},     {"Barcelona", "Haswell", 1},
        {"Bobcat", "Sandybridge", 1},   {"Sandybridge", "Haswell", 1},
        {"Bulldozer", "Haswell", 1},    {"Piledriver", "SkylakeX", 1},
        {"Haswell", "SkylakeX", 1},     {"Zen", "SkylakeX", 1},
        {"Cooperlake", "SkylakeX", 0},  /* this machine: OpenBLAS chose well */
        {"SkylakeX", "SkylakeX", 0},    {"SapphireRapids", "SkylakeX", 0},
        {"Haswell", "Haswell", 0},      {"Zen", "Haswell", 0},
        {"SkylakeX", "Haswell", 0},     /* never downgrade */
        {"Haswell", "Sandybridge", 0},  {"Sandybridge", "Sandybridge", 0},
        {"prescott", "skylakex", 1},    /* case-insensitive, as OpenBLAS reads it */
        {"PRESCOTT", "HASWELL", 1},
        {"Zen5", "SkylakeX", 0},        /* a kernel newer than our table */
        {"Unknown", "SkylakeX", 0},     {"", "SkylakeX", 0},
        {NULL, "SkylakeX", 0},          {"Prescott", "", 0}, /* CPU without AVX */
        {"Prescott", NULL, 0},          {"Prescott", "Pentium9", 0},
        {"Prescott", "Prescott", 0},    {NULL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = attn_blas_should_switch(cases[i].loaded, cases[i].best);
        CHECK_MSG(got == cases[i].want, "should_switch(%s, %s) = %d, want %d",
                  cases[i].loaded ? cases[i].loaded : "NULL",
                  cases[i].best ? cases[i].best : "NULL", got, cases[i].want);
    }
}

static void test_init(void) {
    clear_env();
    attn_blas_info info;
    char err[ATTN_ERRLEN] = "";
    attn_status st = attn_blas_init(&info, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_blas_init: %s: %s", attn_status_name(st), err);
    CHECK_STR_CONTAINS(info.config, "OpenBLAS");
    CHECK_STR_EQ(info.corename, openblas_get_corename());
    CHECK_STR_EQ(info.cpu_best, attn_blas_cpu_best());
    CHECK_INT_EQ(info.threads, 1);
    CHECK_STR_CONTAINS(info.reason, "chosen by OpenBLAS");
    if (info.cpu_best[0] && !attn_blas_should_switch(info.corename, info.cpu_best))
        CHECK_STR_CONTAINS(info.reason, info.cpu_best);
    /* Rounding happens somewhere in 600-term sums: 0 would mean no comparison ran. */
    CHECK(info.selftest_max_rel_err > 0.0);
    CHECK(info.selftest_max_rel_err < 1e-4);
    printf("kernel %s, cpu best %s, reason \"%s\", self-test max rel err %.3g\n",
           info.corename, info.cpu_best, info.reason, info.selftest_max_rel_err);

    CHECK_INT_EQ(attn_blas_init(NULL, err, sizeof err), ATTN_ERR_INVALID);
}

/* The reason read from the environment (init does not reload OpenBLAS, so
 * these only test the wording). */
static void test_reasons(void) {
    attn_blas_info info;
    char err[ATTN_ERRLEN], want[128];
    const char *core = openblas_get_corename();

    clear_env();
    setenv("OPENBLAS_CORETYPE", core, 1);
    CHECK_INT_EQ(attn_blas_init(&info, err, sizeof err), ATTN_OK);
    snprintf(want, sizeof want, "OPENBLAS_CORETYPE=%s set by the user", core);
    CHECK_STR_EQ(info.reason, want);

    setenv("OPENBLAS_CORETYPE", "Nehalem", 1); /* not what is loaded in this process */
    CHECK_INT_EQ(attn_blas_init(&info, err, sizeof err), ATTN_OK);
    CHECK_STR_CONTAINS(info.reason, "OPENBLAS_CORETYPE=Nehalem set by the user");
    CHECK_STR_CONTAINS(info.reason, core);

    snprintf(want, sizeof want, "Prescott -> %s", core);
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv("ATTN_BLAS_REEXEC", want, 1);
    CHECK_INT_EQ(attn_blas_init(&info, err, sizeof err), ATTN_OK);
    snprintf(want, sizeof want, "switched from Prescott: CPU supports %s", core);
    CHECK_STR_EQ(info.reason, want);

    setenv("ATTN_BLAS_REEXEC", "Prescott -> Pentium9", 1);
    CHECK_INT_EQ(attn_blas_init(&info, err, sizeof err), ATTN_OK);
    CHECK_STR_CONTAINS(info.reason, "asked OpenBLAS for Pentium9 instead of Prescott");
    clear_env();
}

/* Guards of attn_blas_reexec_as, in this process: each would exec (and the
 * restarted test would stop at the RUNNING check in main) if it failed. */
static void test_reexec_as_guards(char **argv) {
    clear_env();
    setenv("OPENBLAS_CORETYPE", "Haswell", 1); /* the user wins */
    CHECK_INT_EQ(attn_blas_reexec_as(argv, "Prescott", "SkylakeX"), 0);
    CHECK_STR_EQ(getenv("OPENBLAS_CORETYPE"), "Haswell"); /* untouched */
    CHECK(getenv("ATTN_BLAS_REEXEC") == NULL);

    clear_env();
    setenv("ATTN_BLAS_REEXEC", "Prescott -> SkylakeX", 1); /* already re-executed */
    CHECK_INT_EQ(attn_blas_reexec_as(argv, "Prescott", "SkylakeX"), 0);
    CHECK(getenv("OPENBLAS_CORETYPE") == NULL);

    clear_env();
    CHECK_INT_EQ(attn_blas_reexec_as(argv, "Cooperlake", "SkylakeX"), 0); /* nothing to gain */
    CHECK_INT_EQ(attn_blas_reexec_as(argv, "Prescott", ""), 0);           /* CPU without AVX */
    CHECK_INT_EQ(attn_blas_reexec_as(NULL, "Prescott", "SkylakeX"), 0);
    CHECK(getenv("OPENBLAS_CORETYPE") == NULL);
    CHECK(getenv("ATTN_BLAS_REEXEC") == NULL);
}

/* attn_blas_reexec_if_needed may exec, so each case runs in a forked child
 * whose environment is set first; a re-executed image lands in
 * exec_marked() through TEST_BLAS_EXEC_MARK. The child's exit code says what
 * happened: 0 returned without exec, 3 exec'd once and the next call
 * returned, 4 exec'd with OPENBLAS_CORETYPE not as expected, 5 exec'd twice
 * (a loop). want_core NULL: expect it unset; "*": anything. */
enum { GUARD_RETURNED = 0, GUARD_EXECED = 3, GUARD_BAD_CORE = 4, GUARD_LOOP = 5 };

static int exec_marked(char **argv) {
    int count = atoi(getenv("TEST_BLAS_EXEC_MARK"));
    if (count >= 2) return GUARD_LOOP;
    char next[16];
    snprintf(next, sizeof next, "%d", count + 1);
    setenv("TEST_BLAS_EXEC_MARK", next, 1);
    const char *want = getenv("TEST_BLAS_WANT_CORE"), *got = getenv("OPENBLAS_CORETYPE");
    if (strcmp(want, "*") != 0 && strcmp(want, got ? got : "-") != 0) return GUARD_BAD_CORE;
    attn_blas_reexec_if_needed(argv);
    return GUARD_EXECED;
}

static int guard_child(const char *coretype, const char *reexec, const char *nthreads,
                       const char *want_core) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
        clear_env();
        unsetenv("OPENBLAS_NUM_THREADS");
        if (coretype) setenv("OPENBLAS_CORETYPE", coretype, 1);
        if (reexec) setenv("ATTN_BLAS_REEXEC", reexec, 1);
        if (nthreads) setenv("OPENBLAS_NUM_THREADS", nthreads, 1);
        setenv("TEST_BLAS_WANT_CORE", want_core ? want_core : "-", 1);
        setenv("TEST_BLAS_EXEC_MARK", "1", 1);
        char *child_argv[] = {"test_blas", NULL};
        attn_blas_reexec_if_needed(child_argv);
        _exit(GUARD_RETURNED);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static void test_reexec_if_needed(void) {
    /* The user set the kernel (and the thread count): nothing to do. */
    CHECK_INT_EQ(guard_child("Haswell", NULL, "1", "Haswell"), GUARD_RETURNED);
    /* Already switched once: nothing to do. */
    CHECK_INT_EQ(guard_child("SkylakeX", "Prescott -> SkylakeX", "1", "SkylakeX"),
                 GUARD_RETURNED);
    /* The user's kernel without a thread count: the kernel is kept whatever
     * else happens, and there is never more than one exec. */
    int rc = guard_child("Haswell", NULL, NULL, "Haswell");
    CHECK_MSG(rc == GUARD_RETURNED || rc == GUARD_EXECED,
              "OPENBLAS_CORETYPE=Haswell, no OPENBLAS_NUM_THREADS: child exit %d", rc);
    printf("user's kernel, no thread count: %s\n",
           rc == GUARD_EXECED ? "re-executed once to pin OpenBLAS threads" : "returned");
    /* Nothing set, on this machine's real kernel: at most one exec, and a
     * kernel switch only when the loaded one is weaker. */
    int sw = attn_blas_should_switch(openblas_get_corename(), attn_blas_cpu_best());
    rc = guard_child(NULL, NULL, "1", sw ? attn_blas_cpu_best() : NULL);
    CHECK_INT_EQ(rc, sw ? GUARD_EXECED : GUARD_RETURNED);
    rc = guard_child(NULL, NULL, NULL, sw ? attn_blas_cpu_best() : NULL);
    CHECK_MSG(rc == GUARD_RETURNED || rc == GUARD_EXECED, "nothing set: child exit %d", rc);
}

/* Runs in the re-executed child: argv[2] is the kernel asked for. */
static int reexec_child(char **argv) {
    const char *best = argv[2];
    char want[96];
    snprintf(want, sizeof want, "Prescott -> %s", best);
    CHECK_STR_EQ(getenv("OPENBLAS_CORETYPE"), best);
    CHECK_STR_EQ(getenv("ATTN_BLAS_REEXEC"), want);
    const char *core = openblas_get_corename();
    CHECK_MSG(strcasecmp(core, best) == 0, "re-executed child runs %s, wanted %s", core, best);
    attn_blas_info info;
    char err[ATTN_ERRLEN] = "";
    CHECK_INT_EQ(attn_blas_init(&info, err, sizeof err), ATTN_OK);
    snprintf(want, sizeof want, "switched from Prescott: CPU supports %s", best);
    CHECK_STR_EQ(info.reason, want);
    CHECK_INT_EQ(attn_blas_reexec_as(argv, "Prescott", best), 0); /* no second exec */
    attn_blas_reexec_if_needed(argv);
    return check_exit();
}

static void test_reexec_for_real(void) {
    const char *best = attn_blas_cpu_best();
    const char *config = openblas_get_config();
    if (!best[0] || !strstr(config, "DYNAMIC_ARCH")) {
        printf("skip re-exec: CPU best \"%s\", OpenBLAS %s\n", best, config);
        return;
    }
    clear_env();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO); /* keep the summary line ours */
        setenv("OPENBLAS_NUM_THREADS", "1", 1); /* only the kernel switch is under test */
        char *child_argv[] = {"test_blas", "--reexec-child", (char *)best, NULL};
        attn_blas_reexec_as(child_argv, "Prescott", best);
        _exit(90); /* the exec did not happen */
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "re-executed child: %s %d (90 = no exec, 1 = a check failed)",
              WIFEXITED(status) ? "exit" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    CHECK(getenv("OPENBLAS_CORETYPE") == NULL); /* the parent's environment is its own */
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--reexec-child") == 0) return reexec_child(argv);
    if (getenv("TEST_BLAS_EXEC_MARK")) return exec_marked(argv);
    if (getenv("TEST_BLAS_RUNNING")) { /* something exec'd the test itself */
        fprintf(stderr, "FAIL: test_blas was re-executed by a call that should return\n");
        return 1;
    }
    setenv("TEST_BLAS_RUNNING", "1", 1);
    test_cpu_best();
    test_should_switch();
    test_init();
    test_reasons();
    test_reexec_as_guards(argv);
    test_reexec_if_needed();
    test_reexec_for_real();
    return check_exit();
}
