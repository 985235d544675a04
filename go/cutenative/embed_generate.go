package cutenative

/*
#include <stdlib.h>
#include "cutenative.h"
*/
import "C"

import (
	"context"
	"strings"
	"unsafe"
)

// Embed returns one L2-normalised embedding per text (embedding models; other kinds: ErrUnsupported).
// NUL characters are removed (the reference tokenizer deletes them); invalid UTF-8 is ErrInvalidArgument.
func (m *Model) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(texts) == 0 {
		return nil, &Error{Op: "Embed", Status: StatusInvalidArgument, Message: "no texts"}
	}
	info, err := m.Info()
	if err != nil {
		return nil, err
	}
	if info.EmbeddingDim <= 0 {
		return nil, &Error{Op: "Embed", Status: StatusUnsupported, Message: info.Kind + " models cannot embed"}
	}
	dim := int(info.EmbeddingDim)
	ctexts := (**C.char)(C.malloc(C.size_t(len(texts)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(ctexts))
	view := unsafe.Slice(ctexts, len(texts))
	for i, t := range texts {
		// C strings end at NUL; the reference tokenizer deletes NUL characters, so drop them here.
		view[i] = C.CString(strings.ReplaceAll(t, "\x00", ""))
	}
	defer func() {
		for _, p := range view {
			C.free(unsafe.Pointer(p))
		}
	}()
	flat := make([]float32, len(texts)*dim)
	err = m.with(func(p *C.cn_model) error {
		return runWithContext(ctx, "Embed", func(opts *C.cn_run_options, e *C.cn_error) C.cn_status {
			return C.cn_embed(p, ctexts, C.size_t(len(texts)), opts, floatPtr(flat), C.size_t(len(flat)), e)
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return out, nil
}

// GenerateRequest describes one image (diffusion models).
type GenerateRequest struct {
	Prompt, NegativePrompt string
	Width, Height          int     // multiples of 16; 0: the model's default (1024)
	Steps                  int     // 0: the model's default
	Guidance               float32 // 0: the model's default
	LoRAPath               string  // optional adapter (.safetensors) and its scale
	LoRAScale              float32
	Seed                   uint64
}

// Image is row-major RGB8.
type Image struct {
	Width, Height int
	Pix           []byte
}

// Generate renders an image (diffusion models; other kinds: ErrUnsupported).
func (m *Model) Generate(ctx context.Context, req *GenerateRequest) (*Image, error) {
	if req == nil {
		return nil, &Error{Op: "Generate", Status: StatusInvalidArgument, Message: "request is nil"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var r *C.cn_generate_request
	if err := call("Generate", func(e *C.cn_error) C.cn_status { return C.cn_generate_request_create(&r, e) }); err != nil {
		return nil, err
	}
	defer C.cn_generate_request_free(r)
	prompt, neg := C.CString(req.Prompt), C.CString(req.NegativePrompt)
	defer C.free(unsafe.Pointer(prompt))
	defer C.free(unsafe.Pointer(neg))
	steps := []func(e *C.cn_error) C.cn_status{
		func(e *C.cn_error) C.cn_status { return C.cn_generate_request_set_prompt(r, prompt, neg, e) },
	}
	if req.Width != 0 || req.Height != 0 {
		steps = append(steps, func(e *C.cn_error) C.cn_status {
			return C.cn_generate_request_set_size(r, C.int32_t(req.Width), C.int32_t(req.Height), e)
		})
	}
	if req.Steps != 0 || req.Guidance != 0 {
		steps = append(steps, func(e *C.cn_error) C.cn_status {
			return C.cn_generate_request_set_steps(r, C.int32_t(req.Steps), C.float(req.Guidance), e)
		})
	}
	if req.LoRAPath != "" {
		lora := C.CString(req.LoRAPath)
		defer C.free(unsafe.Pointer(lora))
		steps = append(steps, func(e *C.cn_error) C.cn_status {
			return C.cn_generate_request_set_lora(r, lora, C.float(req.LoRAScale), e)
		})
	}
	for _, s := range steps {
		if err := call("Generate", s); err != nil {
			return nil, err
		}
	}
	var img *Image
	err := m.with(func(p *C.cn_model) error {
		var n C.size_t
		if err := call("Generate", func(e *C.cn_error) C.cn_status { return C.cn_generate_get_size(p, r, &n, e) }); err != nil {
			return err
		}
		w, h := req.Width, req.Height
		if w == 0 {
			w, h = 1024, 1024
		}
		img = &Image{Width: w, Height: h, Pix: make([]byte, int(n))}
		return runWithContext(ctx, "Generate", func(opts *C.cn_run_options, e *C.cn_error) C.cn_status {
			C.cn_run_options_set_seed(opts, C.uint64_t(req.Seed), nil)
			return C.cn_generate(p, r, opts, (*C.uint8_t)(unsafe.Pointer(&img.Pix[0])), n, e)
		})
	})
	if err != nil {
		return nil, err
	}
	return img, nil
}
