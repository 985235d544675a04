/* Compiled as C99 with -Wall -Wextra -pedantic -Werror: the public header must be plain C. */
#include "cutenative.h"

int cn_header_c99_check(void);
int cn_header_c99_check(void) {
    cn_model_params p;
    cn_model_params_init(&p);
    return (int)p.struct_size + CN_ABI_VERSION_MAJOR + (int)CN_STATUS_INTERNAL;
}
