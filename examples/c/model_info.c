/* Prints what cutenative knows about a model directory, or about the process's CPU numerics.
 *   cn_model_info <model_dir> [cpu|cuda] [f32|bf16|f16]
 *   cn_model_info --numerics
 * Exit status 0 on success, 1 on a cutenative error (its status and message are printed), 2 on usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cutenative.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <model_dir> [cpu|cuda] [f32|bf16|f16] | --numerics\n", argv[0]);
        return 2;
    }
    uint32_t major = 0, minor = 0;
    cn_abi_version(&major, &minor);
    if (major != CN_ABI_VERSION_MAJOR || minor < CN_ABI_VERSION_MINOR) {
        fprintf(stderr, "libcutenative ABI %u.%u is incompatible with this program's %d.%d\n", major, minor, CN_ABI_VERSION_MAJOR,
                CN_ABI_VERSION_MINOR);
        return 1;
    }
    printf("%s\n", cn_build_info());
    if (strcmp(argv[1], "--numerics") == 0) {
        const char* numerics = NULL;
        const uint32_t flags = cn_cpu_numerics(&numerics);
        printf("cpu numerics:    %s (batch-invariant %s, thread-invariant %s)\n", numerics, (flags & CN_CPU_BATCH_INVARIANT) ? "yes" : "no",
               (flags & CN_CPU_THREAD_INVARIANT) ? "yes" : "no");
        return 0;
    }

    cn_error* err = NULL;
    if (cn_error_create(&err) != CN_STATUS_OK) return 1;

    cn_model_params params;
    cn_model_params_init(&params);
    if (argc > 2 && strcmp(argv[2], "cuda") == 0) params.device_type = CN_DEVICE_CUDA;
    if (argc > 3) {
        cn_dtype dt;
        if (cn_dtype_from_name(argv[3], &dt) != CN_STATUS_OK) {
            fprintf(stderr, "unknown dtype %s\n", argv[3]);
            cn_error_free(err);
            return 2;
        }
        params.dtype = dt;
    }

    cn_model* model = NULL;
    if (cn_model_create(argv[1], &params, &model, err) != CN_STATUS_OK) {
        fprintf(stderr, "error %s: %s\n", cn_status_name(cn_error_status(err)), cn_error_message(err));
        cn_error_free(err);
        return 1;
    }

    cn_model_info info;
    cn_model_info_init(&info);
    if (cn_model_get_info(model, &info, err) == CN_STATUS_OK) {
        printf("kind:            %s\n", cn_model_kind_name((cn_model_kind)info.kind));
        printf("device:          %s:%d\n", cn_device_type_name((cn_device_type)info.device_type), info.device_index);
        printf("dtype:           %s\n", cn_dtype_name((cn_dtype)info.dtype));
        printf("mode:            %s\n", cn_mode_name((cn_mode)info.mode));
        printf("parameters:      %llu\n", (unsigned long long)info.n_parameters);
        printf("weight bytes:    %llu\n", (unsigned long long)info.weight_bytes);
        if (info.context_length) printf("context length:  %lld\n", (long long)info.context_length);
        if (info.native_horizon) printf("native horizon:  %lld\n", (long long)info.native_horizon);
    }

    size_t nq = 0;
    if (cn_model_get_quantiles(model, NULL, 0, &nq, NULL) == CN_STATUS_OK && nq > 0) {
        float* q = (float*)malloc(nq * sizeof(float));
        if (q && cn_model_get_quantiles(model, q, nq, &nq, err) == CN_STATUS_OK) {
            printf("quantiles:      ");
            for (size_t i = 0; i < nq; ++i) printf(" %.3g", q[i]);
            printf("\n");
        }
        free(q);
    }

    size_t need = 0;
    if (cn_model_describe(model, NULL, 0, &need, err) == CN_STATUS_OK) {
        char* text = (char*)malloc(need);
        if (text && cn_model_describe(model, text, need, &need, err) == CN_STATUS_OK) printf("describe:        %s\n", text);
        free(text);
    }

    cn_model_free(model);
    cn_error_free(err);
    return 0;
}
