package testenv

// A direct C path through the library's ABI, for tests that compare the Go binding with it (cgo cannot be
// used in _test.go files). It shares no code with go/cutenative.

/*
#cgo CFLAGS: -I${SRCDIR}/../../cutenative/include
#cgo pkg-config: cutenative
#include <stdlib.h>
#include <string.h>
#include "cutenative.h"

// Loads the model in dir (CPU, fp32), generates one image into out and frees everything; on failure the
// library's message is copied into msg.
static cn_status direct_generate(const char* dir, const char* prompt, const char* negative, int32_t width, int32_t height,
                                 int32_t steps, float guidance, double truncation, double normalization, uint64_t seed,
                                 uint8_t* out, size_t out_bytes, char* msg, size_t msg_cap) {
	cn_error* err = NULL;
	cn_model* model = NULL;
	cn_generate_request* req = NULL;
	cn_run_options* opts = NULL;
	size_t bytes = 0;
	cn_status st = cn_error_create(&err);
	if (st != CN_STATUS_OK) return st;
	if ((st = cn_model_create(dir, NULL, &model, err)) == CN_STATUS_OK &&
	    (st = cn_generate_request_create(&req, err)) == CN_STATUS_OK &&
	    (st = cn_generate_request_set_prompt(req, prompt, negative, err)) == CN_STATUS_OK &&
	    (st = cn_generate_request_set_size(req, width, height, err)) == CN_STATUS_OK &&
	    (st = cn_generate_request_set_steps(req, steps, guidance, err)) == CN_STATUS_OK &&
	    (st = cn_generate_request_set_cfg(req, truncation, normalization, err)) == CN_STATUS_OK &&
	    (st = cn_run_options_create(&opts, err)) == CN_STATUS_OK &&
	    (st = cn_run_options_set_seed(opts, seed, err)) == CN_STATUS_OK &&
	    (st = cn_generate_get_size(model, req, &bytes, err)) == CN_STATUS_OK) {
		st = bytes == out_bytes ? cn_generate(model, req, opts, out, out_bytes, err) : CN_STATUS_INVALID_ARGUMENT;
	}
	if (st != CN_STATUS_OK && msg_cap > 0) {
		strncpy(msg, bytes != out_bytes && cn_error_status(err) == CN_STATUS_OK ? "image size" : cn_error_message(err), msg_cap - 1);
		msg[msg_cap - 1] = 0;
	}
	cn_run_options_free(opts);
	cn_generate_request_free(req);
	cn_model_free(model);
	cn_error_free(err);
	return st;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// DirectGenerate makes one image through the C ABI alone: it loads the model in dir (CPU, fp32), sets every
// request field explicitly (negative nil: none), seeds the run options and returns the RGB8 bytes.
func DirectGenerate(dir, prompt string, negative *string, width, height, steps int, guidance float32, truncation, normalization float64,
	seed uint64) ([]byte, error) {
	cdir, cprompt := C.CString(dir), C.CString(prompt)
	defer C.free(unsafe.Pointer(cdir))
	defer C.free(unsafe.Pointer(cprompt))
	var cneg *C.char
	if negative != nil {
		cneg = C.CString(*negative)
		defer C.free(unsafe.Pointer(cneg))
	}
	out := make([]byte, width*height*3)
	msg := make([]byte, 1024)
	st := C.direct_generate(cdir, cprompt, cneg, C.int32_t(width), C.int32_t(height), C.int32_t(steps), C.float(guidance),
		C.double(truncation), C.double(normalization), C.uint64_t(seed), (*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)),
		(*C.char)(unsafe.Pointer(&msg[0])), C.size_t(len(msg)))
	if st != C.CN_STATUS_OK {
		return nil, fmt.Errorf("cn_generate path: %s: %s", C.GoString(C.cn_status_name(st)), C.GoString((*C.char)(unsafe.Pointer(&msg[0]))))
	}
	return out, nil
}
