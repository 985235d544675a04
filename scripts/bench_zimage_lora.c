/* LoRA adapter benchmark for Z-Image through the public C ABI only: fuse, switch and restore costs, and the checks
 * that restoring gives the base image back bit for bit. One JSON object per line on stdout.
 *   bench_zimage_lora MODEL_DIR ADAPTER_A ADAPTER_B [--device cuda|cpu] [--dtype bf16|f32] [--size N] [--steps N]
 *                     [--reps N] [--allowed-dir DIR]
 * Defaults: cpu, f32, 1024, the model's steps, 3 reps; eager mode, guidance = the model's, seed 42, scale 1.
 * Build:  cc -O2 -std=c11 -Icapi/include scripts/bench_zimage_lora.c -Lbuild -lcutenative \
 *             -Wl,-rpath,$PWD/build -o /tmp/bench_zimage_lora          (build-gpu on the GPU machine)
 * Adapters: scripts/make_zimage_bench_lora.py. GPU run: scripts/device_zimage_lora.sh.
 * Exit status: 0 when every check holds, 1 on a failed check or a cutenative error (status and message printed),
 * 2 on usage. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cutenative.h"

#define SEED 42
#define PROMPT "a red fox in the snow, photograph"

static cn_error* err;

static void die(const char* what) {
    fprintf(stderr, "%s: %s: %s\n", what, cn_status_name(cn_error_status(err)), cn_error_message(err));
    exit(1);
}
#define CHECK(call)                             \
    do {                                        \
        if ((call) != CN_STATUS_OK) die(#call); \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* A sample list for medians (-1 when empty). */
typedef struct {
    double v[256];
    int n;
} samples;
static void add(samples* s, double x) {
    if (s->n < 256) s->v[s->n++] = x;
}
static double median(const samples* s) {
    if (s->n == 0) return -1;
    double t[256];
    memcpy(t, s->v, sizeof(double) * (size_t)s->n);
    qsort(t, (size_t)s->n, sizeof(double), cmp_double);
    return s->n % 2 ? t[s->n / 2] : (t[s->n / 2 - 1] + t[s->n / 2]) / 2;
}

static const char* tf(int b) { return b ? "true" : "false"; }

/* Prints s as a JSON string (quotes, backslashes and control characters escaped). */
static void json_str(const char* s) {
    putchar('"');
    for (; s && *s; ++s) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* The run's state. */
static cn_model* model;
static cn_generate_request* req;
static cn_run_options* opts;
static size_t img_bytes;
static uint8_t* img;              /* the last call's image */
static const char* held = "none"; /* the adapter set the weights hold (after the last call) */
static samples s_base, s_fused, s_fuse, s_restore, s_switch, s_load;

/* Sets the request's adapters: set is "none", "A", "B" or "A+B". */
static void use_set(const char* set, const cn_adapter* a, const cn_adapter* b) {
    CHECK(cn_generate_request_clear_adapters(req, err));
    if (strchr(set, 'A')) CHECK(cn_generate_request_add_adapter(req, a, 1.0f, err));
    if (strchr(set, 'B')) CHECK(cn_generate_request_add_adapter(req, b, 1.0f, err));
}

/* One generate call with adapter set `set`: prints its JSON line, leaves the image in img, files the samples;
 * returns the call's total_ms. */
static double gen(const char* label, const char* set, const cn_adapter* a, const cn_adapter* b) {
    use_set(set, a, b);
    cn_run_options_reset(opts);
    CHECK(cn_run_options_set_seed(opts, SEED, err));
    const double t0 = now_ms();
    CHECK(cn_generate(model, req, opts, img, img_bytes, err));
    const double wall = now_ms() - t0;
    cn_call_timings t;
    cn_call_timings_init(&t);
    CHECK(cn_run_options_get_timings(opts, &t, err));
    const char* kind = !strcmp(set, held) ? "same" : !strcmp(held, "none") ? "fuse" : !strcmp(set, "none") ? "restore" : "switch";
    printf(
        "{\"call\":\"%s\",\"set\":\"%s\",\"from\":\"%s\",\"kind\":\"%s\",\"prepare_ms\":%.3f,\"adapters_ms\":%.3f,"
        "\"text_ms\":%.3f,\"denoise_ms\":%.3f,\"decode_ms\":%.3f,\"total_ms\":%.3f,\"wall_ms\":%.3f}\n",
        label, set, held, kind, t.prepare_ms, t.adapters_ms, t.text_ms, t.denoise_ms, t.decode_ms, t.total_ms, wall);
    fflush(stdout);
    if (!strcmp(kind, "fuse") && !strcmp(set, "A")) add(&s_fuse, t.adapters_ms);
    if (!strcmp(kind, "restore")) add(&s_restore, t.adapters_ms);
    if (!strcmp(kind, "switch") && strlen(set) == 1 && strlen(held) == 1) add(&s_switch, t.adapters_ms); /* A<->B */
    if (!strcmp(kind, "same") && strcmp(set, "none")) add(&s_fused, t.total_ms);
    held = set;
    return t.total_ms;
}

static cn_adapter* load(const char* name, const char* path, const char* allowed_dir) {
    cn_adapter_params p;
    cn_adapter_params_init(&p);
    p.allowed_dir = allowed_dir;
    cn_adapter* a = NULL;
    const double t0 = now_ms();
    CHECK(cn_adapter_load(model, path, &p, &a, err));
    const double ms = now_ms() - t0;
    add(&s_load, ms);
    cn_adapter_info info;
    cn_adapter_info_init(&info);
    CHECK(cn_adapter_get_info(a, &info, err));
    printf("{\"adapter\":\"%s\",\"path\":", name);
    json_str(path);
    printf(",\"load_ms\":%.3f,\"family\":", ms);
    json_str(info.family);
    printf(",\"n_targets\":%llu,\"n_patches\":%llu,\"max_rank\":%lld,\"factor_bytes\":%llu}\n", (unsigned long long)info.n_targets,
           (unsigned long long)info.n_patches, (long long)info.max_rank, (unsigned long long)info.factor_bytes);
    return a;
}

static uint8_t* copy_img(void) {
    uint8_t* p = malloc(img_bytes);
    if (!p) {
        fprintf(stderr, "out of memory for %zu bytes\n", img_bytes);
        exit(1);
    }
    return memcpy(p, img, img_bytes);
}

static int usage(const char* argv0) {
    fprintf(stderr,
            "usage: %s MODEL_DIR ADAPTER_A ADAPTER_B [--device cuda|cpu] [--dtype bf16|f32] [--size N] [--steps N] "
            "[--reps N] [--allowed-dir DIR]\n",
            argv0);
    return 2;
}

int main(int argc, char** argv) {
    if (argc < 4) return usage(argv[0]);
    const char *dir = argv[1], *path_a = argv[2], *path_b = argv[3], *device = "cpu", *dtype = "f32", *allowed = NULL;
    int size = 1024, steps = CN_GENERATE_DEFAULT_STEPS, reps = 3;
    for (int i = 4; i < argc; i += 2) {
        if (i + 1 >= argc) return usage(argv[0]);
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--device"))
            device = v;
        else if (!strcmp(k, "--dtype"))
            dtype = v;
        else if (!strcmp(k, "--size"))
            size = atoi(v);
        else if (!strcmp(k, "--steps"))
            steps = atoi(v);
        else if (!strcmp(k, "--reps"))
            reps = atoi(v);
        else if (!strcmp(k, "--allowed-dir"))
            allowed = v;
        else
            return usage(argv[0]);
    }
    cn_dtype dt;
    if ((strcmp(device, "cpu") && strcmp(device, "cuda")) || (strcmp(dtype, "bf16") && strcmp(dtype, "f32")) ||
        cn_dtype_from_name(dtype, &dt) != CN_STATUS_OK || size < 1 || reps < 1 || reps > 50)
        return usage(argv[0]);

    if (cn_error_create(&err) != CN_STATUS_OK) return 1;
    cn_model_params mp;
    cn_model_params_init(&mp);
    mp.device_type = !strcmp(device, "cuda") ? CN_DEVICE_CUDA : CN_DEVICE_CPU;
    mp.mode = CN_MODE_EAGER;
    mp.dtype = dt;
    double t0 = now_ms();
    CHECK(cn_model_create(dir, &mp, &model, err));
    const double model_load_ms = now_ms() - t0;
    cn_model_info info;
    cn_model_info_init(&info);
    CHECK(cn_model_get_info(model, &info, err));
    printf("{\"build\":");
    json_str(cn_build_info());
    printf(",\"model\":");
    json_str(dir);
    printf(
        ",\"device\":\"%s\",\"dtype\":\"%s\",\"mode\":\"%s\",\"size\":%d,\"steps\":%d,"
        "\"reps\":%d,\"seed\":%d,\"weight_bytes\":%llu,\"model_load_ms\":%.1f}\n",
        device, dtype, cn_mode_name((cn_mode)info.mode), size, steps == CN_GENERATE_DEFAULT_STEPS ? (int)info.default_steps : steps, reps,
        SEED, (unsigned long long)info.weight_bytes, model_load_ms);

    CHECK(cn_generate_request_create(&req, err));
    CHECK(cn_generate_request_set_prompt(req, PROMPT, NULL, err));
    CHECK(cn_generate_request_set_size(req, size, size, err));
    CHECK(cn_generate_request_set_steps(req, steps, CN_GENERATE_DEFAULT_GUIDANCE, err));
    CHECK(cn_generate_get_size(model, req, &img_bytes, err));
    CHECK(cn_run_options_create(&opts, err));
    img = malloc(img_bytes);
    if (!img) return fprintf(stderr, "out of memory\n"), 1;

    /* Warm-up and base images (no adapter). */
    gen("warmup", "none", NULL, NULL);
    uint8_t* base = NULL;
    int base_stable = 1;
    for (int r = 0; r < reps; ++r) {
        add(&s_base, gen("base", "none", NULL, NULL));
        if (!base)
            base = copy_img();
        else
            base_stable &= !memcmp(base, img, img_bytes);
    }

    cn_adapter* a = load("A", path_a, allowed);
    cn_adapter* b = load("B", path_b, allowed);

    /* The sequence. */
    gen("A (fuse: none->A)", "A", a, b);
    uint8_t* img_a = copy_img();
    const int a_differs = memcmp(img_a, base, img_bytes) != 0;
    gen("A again (no switch)", "A", a, b);
    int a_stable = !memcmp(img_a, img, img_bytes);
    gen("B (switch A->B)", "B", a, b);
    uint8_t* img_b = copy_img();
    const int b_differs_a = memcmp(img_a, img_b, img_bytes) != 0;
    gen("B again", "B", a, b);
    gen("none (restore B->none)", "none", a, b);
    const int restore1 = !memcmp(base, img, img_bytes);
    gen("A (fuse again)", "A", a, b);
    const int fuse_again = !memcmp(img_a, img, img_bytes);
    gen("A+B (two adapters)", "A+B", a, b);
    const int ab_differs = memcmp(img_a, img, img_bytes) && memcmp(img_b, img, img_bytes);
    gen("none (restore)", "none", a, b);
    const int restore2 = !memcmp(base, img, img_bytes);
    /* More switch samples: A, B, A, B, ... (the first A fuses from none). */
    for (int r = 0; r < reps; ++r) {
        gen(!strcmp(held, "none") ? "pair A (fuse: none->A)" : "pair A (switch B->A)", "A", a, b);
        a_stable &= !memcmp(img_a, img, img_bytes);
        gen("pair B (switch A->B)", "B", a, b);
    }

    const int ok = restore1 && restore2 && fuse_again && a_differs;
    printf(
        "{\"checks\":{\"restore_equals_base\":%s,\"restore_after_two_equals_base\":%s,\"fuse_again_equals_first_a\":%s,"
        "\"a_differs_from_base\":%s},\"info\":{\"base_repeatable\":%s,\"a_repeatable\":%s,\"b_differs_from_a\":%s,"
        "\"a_plus_b_differs\":%s},\"ok\":%s}\n",
        tf(restore1), tf(restore2), tf(fuse_again), tf(a_differs), tf(base_stable), tf(a_stable), tf(b_differs_a), tf(ab_differs), tf(ok));

    cn_adapter_stats st;
    cn_adapter_stats_init(&st);
    CHECK(cn_model_get_adapter_stats(model, &st, err));
    printf("{\"adapter_stats\":{\"switches\":%llu,\"switch_seconds\":%.6f,\"backup_bytes\":%llu,\"touched\":%llu}}\n",
           (unsigned long long)st.switches, st.switch_seconds, (unsigned long long)st.backup_bytes, (unsigned long long)st.touched);
    printf(
        "{\"summary\":{\"base_image_ms\":%.3f,\"fused_image_ms\":%.3f,\"fuse_ms\":%.3f,\"restore_ms\":%.3f,\"switch_ms\":%.3f,"
        "\"adapter_load_ms\":%.3f,\"n\":{\"base\":%d,\"fused\":%d,\"fuse\":%d,\"restore\":%d,\"switch\":%d,\"load\":%d}}}\n",
        median(&s_base), median(&s_fused), median(&s_fuse), median(&s_restore), median(&s_switch), median(&s_load), s_base.n, s_fused.n,
        s_fuse.n, s_restore.n, s_switch.n, s_load.n);

    free(base);
    free(img_a);
    free(img_b);
    free(img);
    cn_adapter_free(a);
    cn_adapter_free(b);
    cn_run_options_free(opts);
    cn_generate_request_free(req);
    cn_model_free(model);
    cn_error_free(err);
    return ok ? 0 : 1;
}
