// The public header compiles as C++ too, with the same warnings as errors.
#include "cutenative.h"

int cn_header_cxx_check() {
    cn_model_info info;
    cn_model_info_init(&info);
    return static_cast<int>(info.struct_size) + CN_ABI_VERSION_MINOR;
}
