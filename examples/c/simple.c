/* The C API in one page: load a model directory, forecast one series held in an array, print its quantiles.
 *   cn_simple <model_dir> [horizon]        (build/examples/c/cn_simple; horizon defaults to 12)
 * Every fallible call returns a cn_status and fills the caller-owned cn_error; the caller owns and frees
 * every handle. cn_forecast_csv (forecast.c) is the same with a CSV reader, devices and dtypes. */
#include <stdio.h>
#include <stdlib.h>

#include "cutenative.h"

/* Monthly airline passengers (thousands), 1949-1950: examples/data/airpassengers.csv's first 24 months. */
static const float series[] = {112, 118, 132, 129, 121, 135, 148, 148, 136, 119, 104, 118,
                               115, 126, 141, 135, 125, 149, 170, 170, 158, 133, 114, 140};
static const float levels[] = {0.1f, 0.5f, 0.9f};
#define N_LEVELS 3

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s <model_dir> [horizon]\n", argv[0]);
        return 2;
    }
    const int64_t horizon = argc == 3 ? atoi(argv[2]) : 12;
    cn_error* err = NULL;
    cn_model* model = NULL;
    cn_forecast_request* req = NULL;
    float* out = NULL;
    int rc = 1;
    if (cn_error_create(&err) != CN_STATUS_OK) return 1;

    cn_model_params params; /* defaults: CPU, f32, the library's thread count */
    cn_model_params_init(&params);
    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    if (cn_model_create(argv[1], &params, &model, err) != CN_STATUS_OK || cn_forecast_request_create(&req, err) != CN_STATUS_OK ||
        cn_forecast_request_add_series(req, series, sizeof series / sizeof series[0], -1, NULL, err) != CN_STATUS_OK ||
        cn_forecast_request_set_horizon(req, horizon, err) != CN_STATUS_OK ||
        cn_forecast_request_set_quantiles(req, levels, N_LEVELS, err) != CN_STATUS_OK ||
        cn_forecast_get_shape(model, req, &shape, err) != CN_STATUS_OK) /* [series][levels][steps] */
        goto done;
    out = malloc((size_t)shape.n_values * sizeof(float));
    if (!out) goto done;
    if (cn_forecast(model, req, NULL, out, (size_t)shape.n_values, NULL, 0, err) != CN_STATUS_OK) goto done;

    printf("step q0.1 q0.5 q0.9\n");
    for (uint64_t h = 0; h < shape.horizon; ++h) {
        printf("%llu", (unsigned long long)(h + 1));
        for (int q = 0; q < N_LEVELS; ++q) printf(" %g", out[q * shape.horizon + h]);
        printf("\n");
    }
    rc = 0;
done:
    if (rc != 0 && cn_error_status(err) != CN_STATUS_OK)
        fprintf(stderr, "error %s: %s\n", cn_status_name(cn_error_status(err)), cn_error_message(err));
    free(out);
    cn_forecast_request_free(req);
    cn_model_free(model);
    cn_error_free(err);
    return rc;
}
