/*
 * cutenative.h: the one public C header of cutenative, a native inference runtime for time-series
 * forecasters (Chronos-2, Kronos, Toto), sentence embeddings and diffusion image generation (Z-Image).
 *
 * C99 and C++; fixed-width integers, size_t, float, UTF-8 NUL-terminated strings and opaque handles only.
 * No struct is ever passed by value; every enum has explicit values.
 *
 * ---------------------------------------------------------------------------------------------------------
 * Basic usage (forecast):
 *
 *     cn_error* err = NULL;
 *     cn_error_create(&err);                               // optional; NULL is accepted everywhere
 *
 *     cn_model_params mp;
 *     cn_model_params_init(&mp);                           // CPU, fp32
 *     cn_model* model = NULL;
 *     if (cn_model_create("/models/chronos-2", &mp, &model, err) != CN_STATUS_OK) {
 *         fprintf(stderr, "%s\n", cn_error_message(err));  // says which file / field / tensor
 *         ...
 *     }
 *
 *     cn_forecast_request* req = NULL;
 *     cn_forecast_request_create(&req, err);
 *     cn_forecast_request_add_series(req, values, n_values, -1, NULL, err);
 *     cn_forecast_request_set_horizon(req, 24, err);
 *
 *     cn_forecast_shape shape;
 *     cn_forecast_shape_init(&shape);
 *     cn_forecast_get_shape(model, req, &shape, err);      // [series][outputs][horizon]
 *     float* out = malloc(shape.n_values * sizeof(float));
 *     cn_forecast(model, req, NULL, out, shape.n_values, NULL, 0, err);
 *
 *     free(out);
 *     cn_forecast_request_free(req);
 *     cn_model_free(model);
 *     cn_error_free(err);
 *
 * ---------------------------------------------------------------------------------------------------------
 * Errors. Every fallible function returns a cn_status. It may also fill a caller-owned cn_error with a
 * message (copied; it names the file, field or tensor at fault). There is no thread-local or per-handle
 * "last error": the error travels with the call, so bindings whose threads move (Go) stay correct.
 * No function ever throws, aborts or longjmps on bad input: NULL handles, NULL pointers, NaN/Inf where not
 * allowed, wrong sizes and corrupt files all come back as statuses.
 *
 * Thread-safety. Unless a function says otherwise:
 *   - a cn_model may be used by many threads at once for cn_forecast / cn_embed / cn_generate and the
 *     getters; cn_model_set_mode returns CN_STATUS_BUSY while any such call is running; cn_model_free must
 *     not race with any other use of the same model;
 *   - a request, a run-options object or an error object must not be used by two calls at the same time,
 *     except cn_run_options_cancel and cn_run_options_get_progress, which may be called from any thread
 *     while the run that uses the options is in flight;
 *   - any function may be called from any OS thread; each call sets its own device, stream and inference
 *     mode.
 *
 * Ownership. The library never keeps a caller pointer after a call returns: inputs are copied, outputs are
 * written into caller-allocated buffers whose exact size a `*_get_shape` / `*_size` call gives first.
 * Objects the library allocates are released by their own `*_free`, which accepts NULL.
 *
 * Versioning (Triton's rule). Adding a function or an enum value bumps CN_ABI_VERSION_MINOR; removing or
 * changing a function's behaviour bumps CN_ABI_VERSION_MAJOR, which is also the SONAME
 * (libcutenative.so.<major>). A client requires major(lib) == CN_ABI_VERSION_MAJOR and
 * minor(lib) >= CN_ABI_VERSION_MINOR. Structs carry `struct_size`, set by their `*_init`, so fields can be
 * appended without breaking older callers.
 */
#ifndef CUTENATIVE_H
#define CUTENATIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef CN_SHARED_BUILD
#define CN_API __attribute__((visibility("default")))
#else
#define CN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================================================== */
/* Versions                                                                                              */
/* ===================================================================================================== */

#define CN_ABI_VERSION_MAJOR 0
#define CN_ABI_VERSION_MINOR 7

/* The ABI version of the loaded library. Either pointer may be NULL. Thread-safe; cannot fail. */
CN_API void cn_abi_version(uint32_t* major, uint32_t* minor);

/* The library's version, e.g. "0.1.0". Static storage, not owned by the caller; never NULL. Thread-safe. */
CN_API const char* cn_version(void);

/* A one-line description of the build: version, torch version, CUDA on/off, compiler. Static storage, not
 * owned by the caller; never NULL. Thread-safe. */
CN_API const char* cn_build_info(void);

/* How reproducible CPU results are in this process: CN_CPU_* flags. If `description` is not NULL it receives a
 * one-line account (processor, ATen's CPU kernels, BLAS and its reproducibility mode; static storage, not owned
 * by the caller). Loading the library sets MKL's conditional numerical reproducibility to AUTO for the process
 * (no measurable cost), unless MKL_CBWR is set in the environment, whose setting then stands; MKL takes it only
 * before its first computation, so a host that ran MKL before loading cutenative gets 0 here unless it sets
 * MKL_CBWR=AUTO itself. The flags describe the batch-invariant forecasters (Chronos-2); Kronos and the embedding
 * model run the reference's multi-threaded GEMMs. Computed once. Thread-safe; cannot fail. Since ABI 0.2. */
/* For fp32 models, and series whose call pads them to the same length (the longest series of the call): */
#define CN_CPU_BATCH_INVARIANT 1u  /* a series' CPU result depends neither on the rest of its call nor on alignment */
#define CN_CPU_THREAD_INVARIANT 2u /* ... nor on the number of CPU threads */
CN_API uint32_t cn_cpu_numerics(const char** description);

/* ===================================================================================================== */
/* Status and errors                                                                                     */
/* ===================================================================================================== */

typedef enum cn_status {
    CN_STATUS_OK = 0,
    CN_STATUS_INVALID_ARGUMENT = 1, /* a NULL pointer, a bad value, a size that does not match */
    CN_STATUS_NOT_FOUND = 2,        /* a file or directory that does not exist */
    CN_STATUS_UNSUPPORTED = 3,      /* this model kind / device / mode cannot do that (in this build) */
    CN_STATUS_MODEL_FORMAT = 4,     /* a corrupt or inconsistent checkpoint or config */
    CN_STATUS_OUT_OF_HOST_MEMORY = 5,
    CN_STATUS_OUT_OF_DEVICE_MEMORY = 6, /* the model stays usable; retry with a smaller request */
    CN_STATUS_CANCELLED = 7,            /* cn_run_options_cancel was called */
    CN_STATUS_DEADLINE_EXCEEDED = 8,    /* the run options' deadline passed */
    CN_STATUS_BUSY = 9,                 /* the object is in use by another call */
    CN_STATUS_INTERNAL = 10             /* a bug or an unexpected runtime failure; the message says what */
} cn_status;

/* A stable name for a status: "OK", "INVALID_ARGUMENT", ...; "UNKNOWN" for values outside the enum.
 * Static storage; never NULL. Thread-safe. */
CN_API const char* cn_status_name(cn_status status);

/* A caller-owned error object. Pass it as the last argument of any fallible call to receive the message;
 * each call clears it on success and fills it on failure. Not thread-safe: use one per concurrent call. */
typedef struct cn_error cn_error;

/* Creates an empty error object (status OK, empty message). The caller owns *out and frees it with
 * cn_error_free. Returns INVALID_ARGUMENT if out is NULL, OUT_OF_HOST_MEMORY if allocation fails. */
CN_API cn_status cn_error_create(cn_error** out);

/* Frees an error object. NULL is accepted. */
CN_API void cn_error_free(cn_error* err);

/* The status stored in err (CN_STATUS_OK for NULL or a cleared error). */
CN_API cn_status cn_error_status(const cn_error* err);

/* The message stored in err: "" for NULL or a cleared error, never NULL. The string is owned by err and
 * valid until err is next passed to a call, cleared or freed. */
CN_API const char* cn_error_message(const cn_error* err);

/* Resets err to OK with an empty message. NULL is accepted. */
CN_API void cn_error_clear(cn_error* err);

/* ===================================================================================================== */
/* Enums shared by models and calls                                                                      */
/* ===================================================================================================== */

typedef enum cn_device_type {
    CN_DEVICE_CPU = 0,
    CN_DEVICE_CUDA = 1
} cn_device_type;

typedef enum cn_dtype {
    CN_DTYPE_F32 = 0,
    CN_DTYPE_BF16 = 1,
    CN_DTYPE_F16 = 2
} cn_dtype;

typedef enum cn_model_kind {
    CN_MODEL_KIND_UNKNOWN = 0,
    CN_MODEL_KIND_CHRONOS2 = 1,  /* forecast */
    CN_MODEL_KIND_KRONOS = 2,    /* forecast (OHLCV, sampled) */
    CN_MODEL_KIND_EMBEDDING = 3, /* embed */
    CN_MODEL_KIND_ZIMAGE = 4,    /* generate */
    CN_MODEL_KIND_TOTO = 5       /* forecast (multivariate, sampled); since ABI 0.6 */
} cn_model_kind;

/* Execution modes. The contract: every mode computes the same function; outputs match fp32 EAGER within the
 * mode's tolerance (GRAPH on Chronos-2 is bit-identical to EAGER on the same device and dtype; the others state
 * theirs in docs/benchmarks.md); bf16/f16 follow the reference implementation's own precision map. A mode a model
 * or device cannot run is UNSUPPORTED at cn_model_create / cn_model_set_mode. Modes that capture CUDA graphs hold
 * graph memory pools (cn_model_info.graph_pool_bytes) and serialise calls. What each mode runs, per architecture,
 * is the table in docs/architecture.md ("Execution modes"). */
typedef enum cn_mode {
    CN_MODE_EAGER = 0, /* the reference's ops; every device */
    CN_MODE_GRAPH = 1, /* CUDA graphs captured on first use, then replayed; CUDA only */
    CN_MODE_FUSED = 2  /* cutenative's kernels (and graphs, where the architecture captures them) */
} cn_mode;

/* Stable lower-case names ("cpu", "bf16", "chronos2", "graph", ...) and back. The *_name functions return
 * static storage ("unknown" outside the enum). The *_from_name functions return INVALID_ARGUMENT for NULL
 * or an unknown name and leave *out untouched then. Thread-safe. */
CN_API const char* cn_device_type_name(cn_device_type v);
CN_API const char* cn_dtype_name(cn_dtype v);
CN_API const char* cn_model_kind_name(cn_model_kind v);
CN_API const char* cn_mode_name(cn_mode v);
CN_API cn_status cn_dtype_from_name(const char* name, cn_dtype* out);
CN_API cn_status cn_mode_from_name(const char* name, cn_mode* out);

/* Whether this build can run on CUDA and how many CUDA devices are visible (0 without CUDA). Thread-safe. */
CN_API int32_t cn_cuda_device_count(void);

/* ===================================================================================================== */
/* Models                                                                                                */
/* ===================================================================================================== */

/* A loaded model: immutable weights plus the execution mode. Opaque. */
typedef struct cn_model cn_model;

/* Parameters of cn_model_create. Fill with cn_model_params_init, then change fields. */
typedef struct cn_model_params {
    uint64_t struct_size;  /* set by cn_model_params_init; do not change */
    int32_t device_type;   /* cn_device_type; default CN_DEVICE_CPU */
    int32_t device_index;  /* CUDA ordinal; default 0 */
    int32_t dtype;         /* cn_dtype of weights and compute; default CN_DTYPE_F32 */
    int32_t mode;          /* initial cn_mode; default CN_MODE_EAGER */
    int32_t n_threads;     /* CPU intra-op threads for this process; 0 = leave as is */
    int32_t check_tensors; /* nonzero: reject weights holding NaN/Inf (slower load); default 0 */
    int32_t mmap_weights;  /* nonzero: CPU weights stored in the checkpoint's dtype alias the file
                                    mapping (zero-copy; the file must not be truncated while loaded, or the
                                    process gets SIGBUS); default 0: copy at load */
    int32_t offload;       /* CN_OFFLOAD_* flags (image models; INVALID_ARGUMENT for others); default 0: every
                              component on the model's device. Since ABI 0.3 (was reserved, 0). */
} cn_model_params;

/* cn_model_params.offload: the text encoder's weights stay in host memory and it runs on the CPU (in the model's
 * dtype), freeing its device memory (7.8 GB for Z-Image Turbo in bf16) for a slower prompt encoding; its output
 * is then computed by the CPU's kernels, so images differ in the last bits from an all-CUDA run. */
#define CN_OFFLOAD_TEXT_ENCODER 1

/* Fills *params with defaults and sets struct_size. NULL is ignored. Thread-safe. */
CN_API void cn_model_params_init(cn_model_params* params);

/* Loads a model from a Hugging Face style directory: config.json plus model.safetensors, or sharded
 * model-0000x-of-0000y.safetensors listed in model.safetensors.index.json. The kind is read from the
 * config. Every tensor is validated (dtype, shape, offsets, expected names/shapes from the config) before
 * any device memory is allocated. `params` may be NULL (defaults).
 * On success the caller owns *out and frees it with cn_model_free; on failure *out is set to NULL.
 * Statuses: INVALID_ARGUMENT (NULL dir/out, bad params), NOT_FOUND (missing dir/file), MODEL_FORMAT
 * (corrupt or inconsistent files; the message names file and field/tensor), UNSUPPORTED (unknown kind,
 * CUDA requested in a CPU build or with no device), OUT_OF_HOST_MEMORY, OUT_OF_DEVICE_MEMORY.
 * Thread-safe (different models may be created concurrently). */
CN_API cn_status cn_model_create(const char* model_dir, const cn_model_params* params, cn_model** out, cn_error* err);

/* Frees the model and all its memory. NULL is accepted. Must not be called while another call uses the
 * model. */
CN_API void cn_model_free(cn_model* model);

/* Fixed facts about a loaded model. Fill with cn_model_info_init first (sets struct_size). */
typedef struct cn_model_info {
    uint64_t struct_size;
    int32_t kind;        /* cn_model_kind */
    int32_t device_type; /* cn_device_type */
    int32_t device_index;
    int32_t dtype; /* cn_dtype */
    int32_t mode;  /* cn_mode (current) */
    int32_t reserved0;
    uint64_t n_parameters;       /* number of weight elements */
    uint64_t weight_bytes;       /* bytes the weights take on their device */
    uint64_t graph_pool_bytes;   /* device bytes held by captured CUDA graphs (0 if none) */
    uint64_t workspace_bytes;    /* device bytes held by workspaces / caches (0 if none) */
    int64_t context_length;      /* forecasters: longest context used (longer is left-truncated); else 0 */
    int64_t native_horizon;      /* forecasters: horizon of one forward pass; else 0 */
    int64_t max_horizon;         /* forecasters: largest horizon accepted; else 0 */
    int64_t n_default_quantiles; /* forecasters with quantile heads: quantile levels of the model; else 0 */
    int64_t embedding_dim;       /* embedding models: output dimension; else 0 */
    int64_t max_tokens;          /* embedding and image models: token limit per text (longer is truncated); else 0 */
    /* Since ABI 0.3 (callers built against 0.2 pass a smaller struct_size and do not receive these): */
    int64_t image_size_multiple; /* image models: width and height must be multiples of this; else 0 */
    int64_t default_steps;       /* image models: the steps CN_GENERATE_DEFAULT_STEPS asks for; else 0 */
    float default_guidance;      /* image models: the guidance a negative guidance asks for; else 0 */
    int32_t reserved1;
} cn_model_info;

/* Sets struct_size and zeroes the rest. NULL is ignored. */
CN_API void cn_model_info_init(cn_model_info* info);

/* Fills *info up to its struct_size (a caller built against an older header gets the fields it knows).
 * INVALID_ARGUMENT for a NULL model/info or a struct_size smaller than ABI 0.2's struct. Thread-safe. */
CN_API cn_status cn_model_get_info(const cn_model* model, cn_model_info* info, cn_error* err);

/* The model's description as JSON: kind, device, dtype, mode, memory and its config values. Caller-owned
 * buffer: writes at most `capacity` bytes including the terminating NUL and always stores the full size
 * (NUL included) in *size_out; call with buf NULL / capacity 0 to query. If capacity is too small, buf
 * holds a truncated, NUL-terminated prefix and INVALID_ARGUMENT is returned. Thread-safe. */
CN_API cn_status cn_model_describe(const cn_model* model, char* buf, size_t capacity, size_t* size_out, cn_error* err);

/* The model's own quantile levels (forecasters with quantile heads), ascending, into a caller buffer of
 * `capacity` floats; *count_out receives the number (query with buf NULL / capacity 0). UNSUPPORTED for
 * models without quantiles. Thread-safe. */
CN_API cn_status cn_model_get_quantiles(const cn_model* model, float* buf, size_t capacity, size_t* count_out, cn_error* err);

/* Switches the execution mode. Statuses: UNSUPPORTED (e.g. GRAPH on CPU), BUSY (a call is running on this
 * model; nothing changed), OUT_OF_DEVICE_MEMORY. Safe to call from any thread; never waits for calls. */
CN_API cn_status cn_model_set_mode(cn_model* model, cn_mode mode, cn_error* err);

/* The current mode, into *out. */
CN_API cn_status cn_model_get_mode(const cn_model* model, cn_mode* out, cn_error* err);

/* ===================================================================================================== */
/* Run options: per call (cancel, deadline, seed, progress)                                              */
/* ===================================================================================================== */

/* Options of one call. Opaque; created and freed by the caller; reusable after a call ended. */
typedef struct cn_run_options cn_run_options;

/* Creates options with no deadline, seed 0 and the cancel flag clear. Caller owns *out
 * (cn_run_options_free). */
CN_API cn_status cn_run_options_create(cn_run_options** out, cn_error* err);

/* Frees the options. NULL is accepted. Must not be called while a call uses them. */
CN_API void cn_run_options_free(cn_run_options* opts);

/* Sets a relative deadline in milliseconds, counted from the start of the call that uses the options;
 * 0 clears it. Negative → INVALID_ARGUMENT. */
CN_API cn_status cn_run_options_set_timeout_ms(cn_run_options* opts, int64_t timeout_ms, cn_error* err);

/* Sets the random seed of sampled models (Kronos, Z-Image). All 64 bits are passed to LibTorch's generator of the
 * model's device, seeded as torch.Generator(device).manual_seed(seed) is: the CPU generator (mt19937) uses the low
 * 32 bits, the CUDA generator (Philox) all 64. */
CN_API cn_status cn_run_options_set_seed(cn_run_options* opts, uint64_t seed, cn_error* err);

/* Requests cancellation of the call using these options. Thread-safe and async-signal-safe; may be called
 * before, during or after the call. The flag is checked between batches, autoregressive steps and
 * diffusion steps; the call then returns CN_STATUS_CANCELLED. NULL is ignored. */
CN_API void cn_run_options_cancel(cn_run_options* opts);

/* Clears the cancel flag, the progress counters and the timings (for reuse; the seed and deadline stay). Not while
 * a call uses the options. */
CN_API void cn_run_options_reset(cn_run_options* opts);

/* Progress of the call using these options: units done and total (batches, tokens or steps). Thread-safe;
 * either output may be NULL. */
CN_API cn_status cn_run_options_get_progress(const cn_run_options* opts, uint64_t* done, uint64_t* total, cn_error* err);

/* Where the last call that used these options spent its time, in milliseconds of host time (a GPU model
 * synchronises its stream at each phase's end, so a phase holds its device work). Phases a model does not have
 * are 0; the phases sum to at most total_ms. Fill with cn_call_timings_init first. Read after the call returned
 * (also after a failed one: the phases reached so far). */
typedef struct cn_call_timings {
    uint64_t struct_size; /* set by cn_call_timings_init; do not change */
    double prepare_ms;    /* checks and tokenizing */
    double adapters_ms;   /* waiting for and switching to the request's adapter set (~0 when the weights held it) */
    double text_ms;       /* the text encoder (Z-Image: the prompt and, with guidance, the negative prompt) */
    double denoise_ms;    /* the denoising steps, initial noise included */
    double decode_ms;     /* the VAE decoder and the copy of the pixels to the caller's buffer */
    double total_ms;      /* the whole call */
} cn_call_timings;

CN_API void cn_call_timings_init(cn_call_timings* timings);
/* Statuses: INVALID_ARGUMENT (NULL opts/out, struct_size too small). Not while a call uses the options. */
CN_API cn_status cn_run_options_get_timings(const cn_run_options* opts, cn_call_timings* out, cn_error* err);

/* ===================================================================================================== */
/* Forecasting (Chronos-2, Kronos)                                                                       */
/* ===================================================================================================== */

/* A batch of forecasting tasks. Opaque; the request copies every array it is given. */
typedef struct cn_forecast_request cn_forecast_request;

/* Creates an empty request (horizon 0: must be set). Caller owns *out (cn_forecast_request_free). */
CN_API cn_status cn_forecast_request_create(cn_forecast_request** out, cn_error* err);

/* Frees the request. NULL is accepted. */
CN_API void cn_forecast_request_free(cn_forecast_request* req);

/* Appends one target series of `length` values (NaN = missing; Inf is rejected at forecast time).
 * `group` joins series into one multivariate task: series with the same non-negative group id are
 * forecast jointly; -1 makes the series a task of its own. Its index (0, 1, ...) goes to *index_out if not
 * NULL; outputs follow this order. */
CN_API cn_status cn_forecast_request_add_series(cn_forecast_request* req, const float* values, size_t length, int64_t group,
                                                size_t* index_out, cn_error* err);

/* Appends n_series target series of `length` values each, stored one after another in `values` (series i at
 * values + i * length), as n_series calls of cn_forecast_request_add_series would: series i joins group
 * groups[i], or is a task of its own when `groups` is NULL. One call instead of one per series (a catalogue or a
 * rolling backtest held as one [n_series, length] array). n_series and length must be at least 1. All or nothing:
 * on an error no series is added. The first one's index goes to *first_index_out if not NULL. Since ABI 0.4. */
CN_API cn_status cn_forecast_request_add_series_batch(cn_forecast_request* req, const float* values, size_t n_series, size_t length,
                                                      const int64_t* groups, size_t* first_index_out, cn_error* err);

/* Appends a numeric covariate to the task of series `series_index` (the task's group). `past` has the
 * same length as that series; `future` (may be NULL with future_length 0) holds known future values for
 * the first future_length (≤ horizon) steps; NaN = unknown. Covariates are inputs only: they produce no
 * output rows. */
CN_API cn_status cn_forecast_request_add_covariate(cn_forecast_request* req, size_t series_index, const float* past, size_t past_length,
                                                   const float* future, size_t future_length, cn_error* err);

/* Appends a categorical covariate (UTF-8 labels; NULL entries = missing), encoded as the reference
 * pipeline encodes it. Same lengths as cn_forecast_request_add_covariate. */
CN_API cn_status cn_forecast_request_add_categorical_covariate(cn_forecast_request* req, size_t series_index, const char* const* past,
                                                               size_t past_length, const char* const* future, size_t future_length,
                                                               cn_error* err);

/* Sets timestamps (Unix seconds, UTC, strictly increasing) for series `series_index`: `history` has the
 * series' length, `future` has `horizon` entries. Required by Kronos (calendar features: minute, hour,
 * weekday, day, month), on the first series of each OHLCV group; ignored by Chronos-2.
 * Kronos requests: each task is a group (same non-negative group id) of 4, 5 or 6 series in the order
 * open, high, low, close[, volume[, amount]] (missing volume/amount are filled as the reference fills them),
 * no NaN/Inf; every series gets its own mean path; `samples` receives each sampled path. The run options'
 * seed seeds the sampler right before inference (CPU: the same tokens as the reference after
 * torch.manual_seed(seed)). */
CN_API cn_status cn_forecast_request_set_timestamps(cn_forecast_request* req, size_t series_index, const int64_t* history,
                                                    size_t history_length, const int64_t* future, size_t future_length, cn_error* err);

/* Sets the number of steps to forecast (≥ 1; ≤ the model's max_horizon). */
CN_API cn_status cn_forecast_request_set_horizon(cn_forecast_request* req, int64_t horizon, cn_error* err);

/* Sets the quantile levels to return, in the order given, each in (0, 1); levels the model lacks are
 * interpolated linearly between the model's levels and held flat beyond its outermost ones, as the
 * reference does (Chronos-2). Toto: the sample paths' quantiles at these levels, which must ascend. Not
 * called: the model's own levels, ascending. */
CN_API cn_status cn_forecast_request_set_quantiles(cn_forecast_request* req, const float* levels, size_t count, cn_error* err);

/* Sampling parameters of sampled forecasters: temperature > 0, top_k ≥ 0 (0 = off; > 0 disables top_p), top_p
 * in (0, 1], sample_count ≥ 1 paths averaged into the mean (Kronos). Toto samples its Student-t mixture: it takes
 * sample_count only and refuses any temperature, top_k or top_p other than 1, 0, 0.9; not called, one path (every
 * quantile is that path). */
CN_API cn_status cn_forecast_request_set_sampling(cn_forecast_request* req, float temperature, int32_t top_k, float top_p,
                                                  int32_t sample_count, cn_error* err);
/* Decoding of forecasters that roll out patch by patch (Toto): `samples_per_batch` sample paths per model call
 * (0, the default: all of sample_count in one; otherwise it must divide sample_count; like the reference's
 * samples_per_batch it changes the sample stream of a seed), `kv_cache` 1 (the default and the reference's) or 0
 * (every step recomputes every patch: the reference's use_kv_cache=False, whose numerics differ from the second or
 * third model call on and whose sampled stream differs from the second),
 * `mean_rollout` 1 to roll out the mixture's mean instead of sampling (one output per series, no samples, no
 * quantiles). Other models ignore it. Since ABI 0.6. */
CN_API cn_status cn_forecast_request_set_decoding(cn_forecast_request* req, int32_t samples_per_batch, int32_t kv_cache,
                                                  int32_t mean_rollout, cn_error* err);

/* Shape of a forecast's outputs. Fill with cn_forecast_shape_init first. */
typedef struct cn_forecast_shape {
    uint64_t struct_size;
    uint64_t n_series;  /* target series of the request, in order of cn_forecast_request_add_series */
    uint64_t n_outputs; /* per step: quantile levels (Chronos-2), or 1 (Kronos: the mean path of the series) */
    uint64_t horizon;
    uint64_t n_values;        /* n_series * n_outputs * horizon: floats the `out` buffer of cn_forecast needs */
    uint64_t n_samples;       /* sampled forecasters: sample paths per series; 0 otherwise */
    uint64_t n_sample_values; /* n_series * n_samples * horizon: floats of `samples` (a path is one output) */
} cn_forecast_shape;

/* Sets struct_size and zeroes the rest. NULL is ignored. */
CN_API void cn_forecast_shape_init(cn_forecast_shape* shape);

/* The largest forecast one call may produce: CN_FORECAST_MAX_VALUES floats (1 GiB) in `out`, and as many in
 * `samples`. A request beyond it is INVALID_ARGUMENT from cn_forecast_get_shape and cn_forecast, naming the
 * count, before anything proportional to it is allocated. Servers should set lower limits of their own. */
#define CN_FORECAST_MAX_VALUES 268435456ull
/* Multivariate tasks (Chronos-2 groups) attend across their rows (targets and covariates): a task whose
 * rows^2 x tokens (x 81 past the native horizon, whose rollout follows 9 paths per row) exceed 2^28 is
 * INVALID_ARGUMENT naming the task; smaller tasks are batched so that no pass exceeds it. */

/* Computes the output shape of `req` on `model` without running it (validates the request's structure and
 * the CN_FORECAST_MAX_VALUES bound). */
CN_API cn_status cn_forecast_get_shape(const cn_model* model, const cn_forecast_request* req, cn_forecast_shape* shape, cn_error* err);

/* Runs the forecast. `out` is caller-allocated with `out_count` ≥ shape.n_values floats, written as
 * [series][output][horizon] (quantile-major for Chronos-2; Toto: its sample paths' quantiles at the request's
 * levels (default 0.1 .. 0.9), then their mean; with mean_rollout the mean path alone). `samples` (may be NULL with samples_count 0)
 * receives [series][sample][horizon] for sampled forecasters (a sample path is one output wide). `opts` may be NULL.
 * Statuses: INVALID_ARGUMENT (the message names the field: empty or (Chronos-2) all-NaN series, Inf, horizon, covariate
 * lengths, buffer too small, ...), UNSUPPORTED (model kind cannot forecast), CANCELLED, DEADLINE_EXCEEDED,
 * OUT_OF_DEVICE_MEMORY (model remains usable). Thread-safe per the header's model rules. */
CN_API cn_status cn_forecast(cn_model* model, const cn_forecast_request* req, cn_run_options* opts, float* out, size_t out_count,
                             float* samples, size_t samples_count, cn_error* err);

/* ===================================================================================================== */
/* Embeddings (sentence-embedding models)                                                                */
/* ===================================================================================================== */

/* Embeds `n_texts` UTF-8 strings into caller-allocated `out` of `out_count` ≥ n_texts * embedding_dim
 * floats, row-major [text][dim], L2-normalised. Invalid UTF-8 → INVALID_ARGUMENT naming the index (and
 * nothing is written). A text ends at its first NUL byte (the reference tokenizer deletes NUL characters,
 * so remove them rather than cut there); texts past the model's max_tokens are truncated, as the reference
 * does. Each text is encoded on its own: its embedding does not depend on the other texts of the call.
 * UNSUPPORTED for models that do not embed. `opts` may be NULL. Thread-safe per the model rules.
 * Ownership: texts and out stay the caller's; nothing is kept after the call. */
CN_API cn_status cn_embed(cn_model* model, const char* const* texts, size_t n_texts, cn_run_options* opts, float* out, size_t out_count,
                          cn_error* err);

/* ===================================================================================================== */
/* Image generation (diffusion models)                                                                   */
/* ===================================================================================================== */

/* Image generation (Z-Image Turbo, diffusers' ZImagePipeline):
 *
 *     cn_generate_request* req = NULL;
 *     cn_generate_request_create(&req, err);               // 1024x1024, the model's default steps and guidance
 *     cn_generate_request_set_prompt(req, "a red fox in the snow", NULL, err);
 *     cn_generate_request_set_size(req, 768, 512, err);
 *     size_t bytes = 0;
 *     cn_generate_get_size(model, req, &bytes, err);       // checks the request against the model
 *     uint8_t* rgb = malloc(bytes);                          // height rows of width RGB8 pixels
 *     cn_run_options_set_seed(opts, 42, err);
 *     cn_generate(model, req, opts, rgb, bytes, err);      // progress: denoising steps done / total
 *
 * The pipeline is diffusers': the prompt in Qwen3's chat template ("<|im_start|>user\n{prompt}<|im_end|>\n
 * <|im_start|>assistant\n"), tokenized and truncated to 512 tokens, encoded by Qwen3 (the second-to-last
 * layer's output); the initial latents [1, C, 2*(H/16), 2*(W/16)] (for a VAE scale factor of 8) are fp32
 * standard-normal noise from LibTorch's generator of the model's device seeded with the run options' seed
 * (cn_run_options_set_seed: a CPU model matches diffusers given torch.Generator("cpu").manual_seed(seed), a CUDA
 * model torch.Generator("cuda").manual_seed(seed)); FlowMatch Euler steps (sigmas linspace(1, 1/steps, steps)
 * shifted by the scheduler's shift, then 0); the VAE decoder; RGB8 rounded as diffusers' PIL output. */

/* One image generation request. Opaque; copies every string it is given. */
typedef struct cn_generate_request cn_generate_request;

/* Creates a request with the defaults: size 1024x1024, CN_GENERATE_DEFAULT_STEPS, guidance
 * CN_GENERATE_DEFAULT_GUIDANCE, no negative prompt, cfg truncation 1 and normalisation 0. Caller owns *out
 * (cn_generate_request_free). */
CN_API cn_status cn_generate_request_create(cn_generate_request** out, cn_error* err);
CN_API void cn_generate_request_free(cn_generate_request* req);

/* The largest prompt (and negative prompt) accepted, in bytes: longer is INVALID_ARGUMENT (the model truncates
 * the tokens beyond its max_tokens, 512 for Z-Image, as diffusers does). */
#define CN_GENERATE_MAX_PROMPT_BYTES 65536
/* Prompt and optional negative prompt (UTF-8, NUL-terminated; negative may be NULL: none, which the pipeline
 * encodes as ""). Invalid UTF-8 is INVALID_ARGUMENT from cn_generate_get_size / cn_generate. */
CN_API cn_status cn_generate_request_set_prompt(cn_generate_request* req, const char* prompt, const char* negative_prompt, cn_error* err);
/* Output size in pixels, each in [1, 4096]. The model requires multiples of cn_model_info.image_size_multiple
 * (16 for Z-Image Turbo): other sizes are INVALID_ARGUMENT from cn_generate_get_size and cn_generate. */
CN_API cn_status cn_generate_request_set_size(cn_generate_request* req, int32_t width, int32_t height, cn_error* err);
/* The model's default steps (8 for Z-Image Turbo: cn_model_info.default_steps). */
#define CN_GENERATE_DEFAULT_STEPS (-1)
/* Any negative guidance: the model's default (0 for Z-Image Turbo: cn_model_info.default_guidance). */
#define CN_GENERATE_DEFAULT_GUIDANCE (-1.0f)
/* Denoising steps, in [1, 1000] or CN_GENERATE_DEFAULT_STEPS, and the guidance scale as diffusers defines it:
 * 0 turns classifier-free guidance off (one transformer pass per step: the turbo recipe); g > 0 runs the
 * negative prompt too and uses pos + g * (pos - neg) (so g = 1 is NOT "off"); negative: the model's default.
 * 0 steps, NaN or infinite guidance are INVALID_ARGUMENT. (Before ABI 0.3 guidance 0 meant "the model's
 * default"; no model generated images then.) */
CN_API cn_status cn_generate_request_set_steps(cn_generate_request* req, int32_t steps, float guidance, cn_error* err);
/* ZImagePipeline's cfg_truncation and cfg_normalization (used only when guidance > 0): a step whose normalised
 * time (1000 - timestep) / 1000 exceeds `truncation` runs without guidance (truncation >= 1: never; the default
 * is 1); `normalization` > 0 rescales the guided prediction so its L2 norm is at most normalization times the
 * positive prediction's (0, the default: off). Both finite; normalization >= 0. Since ABI 0.3. */
CN_API cn_status cn_generate_request_set_cfg(cn_generate_request* req, double truncation, double normalization, cn_error* err);
/* Most images one call makes. */
#define CN_GENERATE_MAX_COUNT 16
/* Images per call, in [1, CN_GENERATE_MAX_COUNT] (default 1): image i's initial noise is drawn from the run
 * options' seed + i (mod 2^64) exactly as a one-image call with that seed draws it; the images go through the
 * model as one batch (with guidance: the positive and negative passes of every image in one); `out` receives them
 * one after another and cn_generate_get_size counts them all. Each image equals its one-image call's up to the
 * batched kernels' rounding. Since ABI 0.7. */
CN_API cn_status cn_generate_request_set_count(cn_generate_request* req, int32_t count, cn_error* err);
/* Applies the LoRA adapter in the .safetensors file `lora_path` (the caller trusts the path) at `scale`, read and
 * validated against the model at each cn_generate; NULL removes it. Loading the adapter once (cn_adapter_load) and
 * adding the handle (cn_generate_request_add_adapter) skips the reading; both may be used on one request (this one
 * comes last). Since ABI 0.5 (before: UNSUPPORTED at generation). */
CN_API cn_status cn_generate_request_set_lora(cn_generate_request* req, const char* lora_path, float scale, cn_error* err);

/* LoRA adapters (Z-Image). An adapter file is read once and validated against one model: every key must map onto
 * the model's transformer (the published families: diffusers/PEFT with lora_adapter_metadata, ai-toolkit, kohya /
 * musubi with .alpha, musubi's fused qkv ComfyUI export, DiffSynth, the original Z-Image names); DoRA, LoKr, LoHa,
 * full-delta and text-encoder keys are UNSUPPORTED (never silently dropped); a key that fits nothing, a shape that
 * does not fit, rank 0 or a non-finite value is INVALID_ARGUMENT naming the key. A request names adapters with a
 * scale each; generation fuses them into the transformer's weights in place,
 *     W = round(fp32(W0) + sum_i scale_i * alpha_i / rank_i * B_i @ A_i),
 * keeping W0 (the weights' own dtype, on their device: memory equal to the weights an adapter touches) so that
 * another set, or none, restores them bit for bit. Calls with the same adapter set (adapters and scales, in
 * order) run together; a call with another set waits until none holds the weights, then switches them.
 *
 *     cn_adapter_params p;
 *     cn_adapter_params_init(&p);
 *     p.allowed_dir = "/srv/loras";                         // the file must resolve under it
 *     cn_adapter* a = NULL;
 *     cn_adapter_load(model, "/srv/loras/pixel-art.safetensors", &p, &a, err);
 *     cn_generate_request_add_adapter(req, a, 0.8f, err);   // the request keeps its own reference
 *     cn_adapter_free(a);                                   // the request still works
 */
typedef struct cn_adapter cn_adapter;

typedef struct cn_adapter_params {
    uint64_t struct_size;
    /* NULL: the path is trusted as given. Otherwise the file, with symlinks and ".." resolved, must lie under this
     * directory (resolved the same way): INVALID_ARGUMENT otherwise. */
    const char* allowed_dir;
    /* Files larger are INVALID_ARGUMENT before they are read; 0: 2 GiB. */
    uint64_t max_file_bytes;
} cn_adapter_params;

CN_API void cn_adapter_params_init(cn_adapter_params* params);
/* Reads and validates the adapter file at `path` against `model` (UNSUPPORTED for models that take no adapters).
 * Caller owns *out (cn_adapter_free). `params` may be NULL (defaults). Thread-safe. */
CN_API cn_status cn_adapter_load(cn_model* model, const char* path, const cn_adapter_params* params, cn_adapter** out, cn_error* err);
/* Frees the caller's reference; requests holding the adapter keep theirs. NULL is fine. */
CN_API void cn_adapter_free(cn_adapter* adapter);

typedef struct cn_adapter_info {
    uint64_t struct_size;
    uint64_t n_targets; /* the model's weights it changes */
    uint64_t n_patches; /* patches (a fused qkv module is three) */
    int64_t max_rank;
    uint64_t factor_bytes; /* its factors, fp32, on the model's device */
    const char* family;    /* the key family recognised ("diffusers/peft", "kohya", ...); valid while the adapter is */
} cn_adapter_info;

CN_API void cn_adapter_info_init(cn_adapter_info* info);
CN_API cn_status cn_adapter_get_info(const cn_adapter* adapter, cn_adapter_info* out, cn_error* err);

/* Adds `adapter` at `scale` (finite; any sign) to the request, after those added before (the order of the sum).
 * The request keeps its own reference. An adapter of another model is INVALID_ARGUMENT at generation. */
CN_API cn_status cn_generate_request_add_adapter(cn_generate_request* req, const cn_adapter* adapter, float scale, cn_error* err);
/* Removes every adapter added with cn_generate_request_add_adapter (set_lora's stays). */
CN_API cn_status cn_generate_request_clear_adapters(cn_generate_request* req, cn_error* err);

typedef struct cn_adapter_stats {
    uint64_t struct_size;
    uint64_t switches;     /* adapter sets fused into the weights (a restore to none counts) */
    double switch_seconds; /* host time those switches took, in total */
    uint64_t backup_bytes; /* the kept originals of every weight an adapter has touched */
    uint64_t touched;      /* weights the current set changes */
} cn_adapter_stats;

CN_API void cn_adapter_stats_init(cn_adapter_stats* stats);
/* The model's adapter state (UNSUPPORTED for models that take no adapters). */
CN_API cn_status cn_model_get_adapter_stats(cn_model* model, cn_adapter_stats* out, cn_error* err);

/* Bytes of the RGB8 image `req` produces on `model` (width * height * 3) into *bytes_out, after checking the
 * request against the model (size multiple, the position range, adapters; the prompt's token count against the
 * caption range is checked by cn_generate, which tokenizes). UNSUPPORTED for models that do not generate. */
CN_API cn_status cn_generate_get_size(const cn_model* model, const cn_generate_request* req, size_t* bytes_out, cn_error* err);

/* Generates an image into caller-allocated `out` (`out_bytes` >= the size above): height rows of width pixels,
 * R, G, B bytes. `opts` may be NULL (seed 0, no deadline). Progress (cn_run_options_get_progress) counts
 * denoising steps; cancellation and the deadline are checked before text encoding, between steps and before
 * decoding (CANCELLED / DEADLINE_EXCEEDED; `out` is then left untouched). Statuses: INVALID_ARGUMENT (the
 * message names the field), UNSUPPORTED (model kind, LoRA), OUT_OF_DEVICE_MEMORY (the model stays usable),
 * CANCELLED, DEADLINE_EXCEEDED. Thread-safe per the model rules. Ownership: nothing is kept after the call. */
CN_API cn_status cn_generate(cn_model* model, const cn_generate_request* req, cn_run_options* opts, uint8_t* out, size_t out_bytes,
                             cn_error* err);

#ifdef __cplusplus
}
#endif

#endif /* CUTENATIVE_H */
