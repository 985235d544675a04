"""cutenative's C ABI (capi/include/cutenative.h) for Python ctypes: the one copy of its constants, enums,
structs and prototypes that the examples and the scripts share. Standard library only.

Where it lives and how to import it: python/cutenative_ctypes.py at the repository root, a plain module (no
package, nothing to install). A user one or two directories down adds this directory to sys.path relative to
its own file, e.g. from examples/python/ or scripts/:

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "python"))  # from examples/python/; from scripts/: "..", "python"
    import cutenative_ctypes as cn

    lib = cn.load_library()                    # path, else $CUTENATIVE_LIB, else $CN_LIB, else build/libcutenative.so
    err = ctypes.c_void_p()
    cn.check(lib, lib.cn_error_create(ctypes.byref(err)), None)
    params = cn.ModelParams()
    lib.cn_model_params_init(ctypes.byref(params))
    model = ctypes.c_void_p()
    cn.check(lib, lib.cn_model_create(b"/models/chronos-2", ctypes.byref(params), ctypes.byref(model), err), err)
    # a failing call raises cn.CnError: str() is "<STATUS_NAME>: <the error object's message>"

It mirrors the header exactly, name for name: every #define and enum value is a module constant of the same
name (CN_STATUS_OK, CN_MODE_GRAPH, ...); the three structs are ModelParams (cn_model_params), ModelInfo
(cn_model_info) and ForecastShape (cn_forecast_shape), fields in header order; PROTOTYPES gives every function's
(restype, argtypes), which load_library sets on the loaded library. Types: enums (cn_status, cn_mode, ...) are
c_int; opaque handles (cn_model*, cn_error*, ...) c_void_p, a handle's out-parameter POINTER(c_void_p);
const char* c_char_p; the writable char* of cn_model_describe POINTER(c_char) (ctypes.create_string_buffer);
arrays typed pointers (float* is POINTER(c_float): pass a ctypes array, or a NumPy array's
arr.ctypes.data_as(cn.FLOAT_P)). tests/examples/check_ctypes_module.py checks all of this against the header
and the built library (ctest python_ctypes_matches_header): change the header and this module together.
"""

import ctypes
import os

__all__ = ["ModelParams", "ModelInfo", "ForecastShape", "AdapterParams", "AdapterInfo", "AdapterStats", "STRUCTS", "PROTOTYPES", "CnError", "LoadError",
           "default_library_path", "load_library", "abi_version", "status_name", "error_from", "check",
           "FLOAT_P", "INT64_P", "SIZE_P", "VOID_PP"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- #defines ------------------------------------------------------------------------------------------

CN_ABI_VERSION_MAJOR = 0
CN_ABI_VERSION_MINOR = 7
CN_CPU_BATCH_INVARIANT = 1
CN_CPU_THREAD_INVARIANT = 2
CN_FORECAST_MAX_VALUES = 268435456
CN_GENERATE_MAX_COUNT = 16
CN_GENERATE_MAX_PROMPT_BYTES = 65536
CN_OFFLOAD_TEXT_ENCODER = 1

# ---- enums ---------------------------------------------------------------------------------------------

# cn_status
CN_STATUS_OK = 0
CN_STATUS_INVALID_ARGUMENT = 1
CN_STATUS_NOT_FOUND = 2
CN_STATUS_UNSUPPORTED = 3
CN_STATUS_MODEL_FORMAT = 4
CN_STATUS_OUT_OF_HOST_MEMORY = 5
CN_STATUS_OUT_OF_DEVICE_MEMORY = 6
CN_STATUS_CANCELLED = 7
CN_STATUS_DEADLINE_EXCEEDED = 8
CN_STATUS_BUSY = 9
CN_STATUS_INTERNAL = 10

# cn_device_type
CN_DEVICE_CPU = 0
CN_DEVICE_CUDA = 1

# cn_dtype
CN_DTYPE_F32 = 0
CN_DTYPE_BF16 = 1
CN_DTYPE_F16 = 2

# cn_model_kind
CN_MODEL_KIND_UNKNOWN = 0
CN_MODEL_KIND_CHRONOS2 = 1
CN_MODEL_KIND_KRONOS = 2
CN_MODEL_KIND_EMBEDDING = 3
CN_MODEL_KIND_ZIMAGE = 4
CN_MODEL_KIND_TOTO = 5

# cn_mode
CN_MODE_EAGER = 0
CN_MODE_GRAPH = 1
CN_MODE_FUSED = 2

# ---- structs -------------------------------------------------------------------------------------------


def _fields(*groups):
    """A struct's _fields_: struct_size (uint64_t, set by the struct's *_init), which every struct of the ABI
    begins with, then each group's (ctype, "name name ...") fields, in header order."""
    return [("struct_size", ctypes.c_uint64)] + [(name, ctype) for ctype, names in groups for name in names.split()]


class ModelParams(ctypes.Structure):
    """cn_model_params (fill with cn_model_params_init, then change fields)."""

    _fields_ = _fields((ctypes.c_int32, "device_type device_index dtype mode n_threads check_tensors mmap_weights "
                                        "offload"))


class ModelInfo(ctypes.Structure):
    """cn_model_info (fill with cn_model_info_init before cn_model_get_info)."""

    _fields_ = _fields((ctypes.c_int32, "kind device_type device_index dtype mode reserved0"),
                       (ctypes.c_uint64, "n_parameters weight_bytes graph_pool_bytes workspace_bytes"),
                       (ctypes.c_int64, "context_length native_horizon max_horizon n_default_quantiles embedding_dim "
                                        "max_tokens image_size_multiple default_steps"),
                       (ctypes.c_float, "default_guidance"), (ctypes.c_int32, "reserved1"))


class ForecastShape(ctypes.Structure):
    """cn_forecast_shape (fill with cn_forecast_shape_init before cn_forecast_get_shape)."""

    _fields_ = _fields((ctypes.c_uint64, "n_series n_outputs horizon n_values n_samples n_sample_values"))


class AdapterParams(ctypes.Structure):
    """cn_adapter_params (fill with cn_adapter_params_init, then change fields)."""

    _fields_ = _fields((ctypes.c_char_p, "allowed_dir"), (ctypes.c_uint64, "max_file_bytes"))


class AdapterInfo(ctypes.Structure):
    """cn_adapter_info (fill with cn_adapter_info_init before cn_adapter_get_info)."""

    _fields_ = _fields((ctypes.c_uint64, "n_targets n_patches"), (ctypes.c_int64, "max_rank"),
                       (ctypes.c_uint64, "factor_bytes"), (ctypes.c_char_p, "family"))


class AdapterStats(ctypes.Structure):
    """cn_adapter_stats (fill with cn_adapter_stats_init before cn_model_get_adapter_stats)."""

    _fields_ = _fields((ctypes.c_uint64, "switches"), (ctypes.c_double, "switch_seconds"),
                       (ctypes.c_uint64, "backup_bytes touched"))


class CallTimings(ctypes.Structure):
    """cn_call_timings (fill with cn_call_timings_init before cn_run_options_get_timings)."""

    _fields_ = _fields((ctypes.c_double, "prepare_ms adapters_ms text_ms denoise_ms decode_ms total_ms"))


# The header's struct name -> its class here.
STRUCTS = {"cn_model_params": ModelParams, "cn_model_info": ModelInfo, "cn_forecast_shape": ForecastShape,
           "cn_adapter_params": AdapterParams, "cn_adapter_info": AdapterInfo, "cn_adapter_stats": AdapterStats,
           "cn_call_timings": CallTimings}

# ---- prototypes ----------------------------------------------------------------------------------------

_st = ctypes.c_int      # cn_status and every other enum
_h = ctypes.c_void_p    # an opaque handle: cn_error*, cn_model*, cn_run_options*, cn_*_request*
_sz = ctypes.c_size_t
_cs = ctypes.c_char_p
FLOAT_P = ctypes.POINTER(ctypes.c_float)
INT64_P = ctypes.POINTER(ctypes.c_int64)
SIZE_P = ctypes.POINTER(ctypes.c_size_t)
VOID_PP = ctypes.POINTER(ctypes.c_void_p)  # a handle's out-parameter (cn_model** ...)
_u32p = ctypes.POINTER(ctypes.c_uint32)
_u64p = ctypes.POINTER(ctypes.c_uint64)
_intp = ctypes.POINTER(ctypes.c_int)     # cn_dtype*, cn_mode*
_csp = ctypes.POINTER(ctypes.c_char_p)   # const char* const*, const char**

# name -> (restype, argtypes), in header order.
PROTOTYPES = {
    # versions
    "cn_abi_version": (None, [_u32p, _u32p]),
    "cn_version": (_cs, []),
    "cn_build_info": (_cs, []),
    "cn_cpu_numerics": (ctypes.c_uint32, [_csp]),
    # status and errors
    "cn_status_name": (_cs, [_st]),
    "cn_error_create": (_st, [VOID_PP]),
    "cn_error_free": (None, [_h]),
    "cn_error_status": (_st, [_h]),
    "cn_error_message": (_cs, [_h]),
    "cn_error_clear": (None, [_h]),
    # enum names
    "cn_device_type_name": (_cs, [_st]),
    "cn_dtype_name": (_cs, [_st]),
    "cn_model_kind_name": (_cs, [_st]),
    "cn_mode_name": (_cs, [_st]),
    "cn_dtype_from_name": (_st, [_cs, _intp]),
    "cn_mode_from_name": (_st, [_cs, _intp]),
    "cn_cuda_device_count": (ctypes.c_int32, []),
    # models
    "cn_model_params_init": (None, [ctypes.POINTER(ModelParams)]),
    "cn_model_create": (_st, [_cs, ctypes.POINTER(ModelParams), VOID_PP, _h]),
    "cn_model_free": (None, [_h]),
    "cn_model_info_init": (None, [ctypes.POINTER(ModelInfo)]),
    "cn_model_get_info": (_st, [_h, ctypes.POINTER(ModelInfo), _h]),
    "cn_model_describe": (_st, [_h, ctypes.POINTER(ctypes.c_char), _sz, SIZE_P, _h]),  # char* buf: writable
    "cn_model_get_quantiles": (_st, [_h, FLOAT_P, _sz, SIZE_P, _h]),
    "cn_model_set_mode": (_st, [_h, _st, _h]),
    "cn_model_get_mode": (_st, [_h, _intp, _h]),
    # run options
    "cn_run_options_create": (_st, [VOID_PP, _h]),
    "cn_run_options_free": (None, [_h]),
    "cn_run_options_set_timeout_ms": (_st, [_h, ctypes.c_int64, _h]),
    "cn_run_options_set_seed": (_st, [_h, ctypes.c_uint64, _h]),
    "cn_run_options_cancel": (None, [_h]),
    "cn_run_options_reset": (None, [_h]),
    "cn_run_options_get_progress": (_st, [_h, _u64p, _u64p, _h]),
    "cn_call_timings_init": (None, [ctypes.POINTER(CallTimings)]),
    "cn_run_options_get_timings": (_st, [_h, ctypes.POINTER(CallTimings), _h]),
    # forecasting
    "cn_forecast_request_create": (_st, [VOID_PP, _h]),
    "cn_forecast_request_free": (None, [_h]),
    "cn_forecast_request_add_series": (_st, [_h, FLOAT_P, _sz, ctypes.c_int64, SIZE_P, _h]),
    "cn_forecast_request_add_series_batch": (_st, [_h, FLOAT_P, _sz, _sz, INT64_P, SIZE_P, _h]),
    "cn_forecast_request_add_covariate": (_st, [_h, _sz, FLOAT_P, _sz, FLOAT_P, _sz, _h]),
    "cn_forecast_request_add_categorical_covariate": (_st, [_h, _sz, _csp, _sz, _csp, _sz, _h]),
    "cn_forecast_request_set_timestamps": (_st, [_h, _sz, INT64_P, _sz, INT64_P, _sz, _h]),
    "cn_forecast_request_set_horizon": (_st, [_h, ctypes.c_int64, _h]),
    "cn_forecast_request_set_quantiles": (_st, [_h, FLOAT_P, _sz, _h]),
    "cn_forecast_request_set_sampling": (_st, [_h, ctypes.c_float, ctypes.c_int32, ctypes.c_float,
                                               ctypes.c_int32, _h]),
    "cn_forecast_request_set_decoding": (_st, [_h, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, _h]),
    "cn_forecast_shape_init": (None, [ctypes.POINTER(ForecastShape)]),
    "cn_forecast_get_shape": (_st, [_h, _h, ctypes.POINTER(ForecastShape), _h]),
    "cn_forecast": (_st, [_h, _h, _h, FLOAT_P, _sz, FLOAT_P, _sz, _h]),
    # embeddings
    "cn_embed": (_st, [_h, _csp, _sz, _h, FLOAT_P, _sz, _h]),
    # image generation
    "cn_generate_request_create": (_st, [VOID_PP, _h]),
    "cn_generate_request_free": (None, [_h]),
    "cn_generate_request_set_prompt": (_st, [_h, _cs, _cs, _h]),
    "cn_generate_request_set_size": (_st, [_h, ctypes.c_int32, ctypes.c_int32, _h]),
    "cn_generate_request_set_steps": (_st, [_h, ctypes.c_int32, ctypes.c_float, _h]),
    "cn_generate_request_set_cfg": (_st, [_h, ctypes.c_double, ctypes.c_double, _h]),
    "cn_generate_request_set_count": (_st, [_h, ctypes.c_int32, _h]),
    "cn_generate_request_set_lora": (_st, [_h, _cs, ctypes.c_float, _h]),
    # LoRA adapters
    "cn_adapter_params_init": (None, [ctypes.POINTER(AdapterParams)]),
    "cn_adapter_load": (_st, [_h, _cs, ctypes.POINTER(AdapterParams), VOID_PP, _h]),
    "cn_adapter_free": (None, [_h]),
    "cn_adapter_info_init": (None, [ctypes.POINTER(AdapterInfo)]),
    "cn_adapter_get_info": (_st, [_h, ctypes.POINTER(AdapterInfo), _h]),
    "cn_generate_request_add_adapter": (_st, [_h, _h, ctypes.c_float, _h]),
    "cn_generate_request_clear_adapters": (_st, [_h, _h]),
    "cn_adapter_stats_init": (None, [ctypes.POINTER(AdapterStats)]),
    "cn_model_get_adapter_stats": (_st, [_h, ctypes.POINTER(AdapterStats), _h]),
    "cn_generate_get_size": (_st, [_h, _h, SIZE_P, _h]),
    "cn_generate": (_st, [_h, _h, _h, ctypes.POINTER(ctypes.c_uint8), _sz, _h]),
}

# ---- loading -------------------------------------------------------------------------------------------


class LoadError(Exception):
    """The library cannot be loaded, lacks a symbol, or has an incompatible ABI."""


class CnError(RuntimeError):
    """A call returned a status other than CN_STATUS_OK. str(): "<STATUS_NAME>: <message>"."""

    def __init__(self, status, status_name, message):
        super().__init__("%s: %s" % (status_name, message))
        self.status = status
        self.status_name = status_name
        self.message = message


def default_library_path():
    """$CUTENATIVE_LIB, else $CN_LIB, else build/libcutenative.so under the repository root."""
    for var in ("CUTENATIVE_LIB", "CN_LIB"):
        if os.environ.get(var):
            return os.environ[var]
    return os.path.join(REPO_ROOT, "build", "libcutenative.so")


def abi_version(lib):
    major, minor = ctypes.c_uint32(0), ctypes.c_uint32(0)
    lib.cn_abi_version(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def load_library(path=None, check_abi=True):
    """Loads libcutenative (path, else default_library_path()), sets every prototype of PROTOTYPES and, with
    check_abi, requires major == CN_ABI_VERSION_MAJOR and minor >= CN_ABI_VERSION_MINOR (the header's rule).
    A path naming an existing file is made absolute (dlopen would otherwise search the library path for a
    bare file name). Raises LoadError."""
    path = path or default_library_path()
    try:
        lib = ctypes.CDLL(os.path.abspath(path) if os.path.exists(path) else path)
    except OSError as e:
        raise LoadError("cannot load %s: %s" % (path, e))
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LoadError("%s has no symbol %s" % (path, name))
        fn.restype = restype
        fn.argtypes = argtypes
    if check_abi:
        major, minor = abi_version(lib)
        if major != CN_ABI_VERSION_MAJOR or minor < CN_ABI_VERSION_MINOR:
            raise LoadError("libcutenative ABI %d.%d is incompatible with this program's %d.%d"
                            % (major, minor, CN_ABI_VERSION_MAJOR, CN_ABI_VERSION_MINOR))
    return lib


# ---- statuses ------------------------------------------------------------------------------------------


def status_name(lib, status):
    """cn_status_name as a str ("OK", "INVALID_ARGUMENT", ...)."""
    return lib.cn_status_name(status).decode("ascii", "replace")


def error_from(lib, status, err):
    """A CnError for `status`, with the message of the error object `err` (may be None: empty message)."""
    return CnError(status, status_name(lib, status), lib.cn_error_message(err).decode("utf-8", "replace"))


def check(lib, status, err):
    """Raises error_from(lib, status, err) unless status is CN_STATUS_OK."""
    if status != CN_STATUS_OK:
        raise error_from(lib, status, err)
