package cutenative

/*
#include <stdlib.h>
#include "cutenative.h"
*/
import "C"

import (
	"context"
	"fmt"
	"image"
	"math"
	"strings"
	"time"
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

// MaxPromptBytes is the longest Prompt (and NegativePrompt) Generate accepts, in bytes: the model truncates the
// tokens beyond its MaxTokens (512 for Z-Image) as diffusers does, so longer text would only be read and cut.
const MaxPromptBytes = C.CN_GENERATE_MAX_PROMPT_BYTES

// DefaultImageSize is the width and height of a request that leaves them 0.
const DefaultImageSize = 1024

// MaxImagesPerCall is the most images one GenerateImages call makes (CN_GENERATE_MAX_COUNT).
const MaxImagesPerCall = C.CN_GENERATE_MAX_COUNT

// GenerateRequest describes one image (diffusion models: Z-Image Turbo, diffusers' ZImagePipeline). The zero
// value of every field but Prompt asks for the model's defaults (Info.DefaultSteps, Info.DefaultGuidance).
type GenerateRequest struct {
	Prompt string // UTF-8, at most MaxPromptBytes, no NUL byte
	// NegativePrompt is used only when guidance is on (> 0). nil: none, which the pipeline encodes as "" (so
	// nil and a pointer to "" give the same image).
	NegativePrompt *string
	// Width and Height in pixels, each in [1, 4096] and a multiple of Info.ImageSizeMultiple (16 for Z-Image
	// Turbo); 0: DefaultImageSize.
	Width, Height int
	// Steps is the number of denoising steps, in [1, 1000]; 0: the model's default (Info.DefaultSteps: 8).
	Steps int
	// Guidance is the classifier-free guidance scale as diffusers defines it: nil asks for the model's default
	// (Info.DefaultGuidance: 0 for Z-Image Turbo); 0 turns guidance off (one transformer pass per step: the
	// turbo recipe); g > 0 also runs the negative prompt and uses pos + g*(pos - neg), so 1 is NOT off.
	// Negative, NaN and infinite values are ErrInvalidArgument.
	Guidance *float32
	// CFGTruncation and CFGNormalization are ZImagePipeline's cfg_truncation and cfg_normalization (used only
	// when guidance > 0): a step whose normalised time (1000 - t) / 1000 exceeds the truncation runs without
	// guidance (nil: 1, never); a normalization > 0 caps the guided prediction's L2 norm at that multiple of
	// the positive prediction's (0: off).
	CFGTruncation    *float64
	CFGNormalization float64
	// Seed seeds the initial noise: LibTorch's generator of the model's device, seeded as
	// torch.Generator(device).manual_seed(Seed) is (a CPU model: the low 32 bits, as diffusers on CPU; a CUDA
	// model: all 64 bits, Philox, as diffusers given a CUDA generator). The same request and seed on the same
	// device give the same bytes.
	Seed uint64
	// Count is how many images one call makes (GenerateImages), in [1, MaxImagesPerCall]; 0: one. Image i's
	// initial noise is drawn from Seed + i exactly as a one-image call with that seed draws it, and the images go
	// through the model as one batch: each equals its one-image call's up to the batched kernels' rounding.
	Count int
	// Adapters are LoRA adapters loaded for this model (Model.LoadAdapter), fused at their scales in this order
	// (the library restores the weights bit for bit for the next request that names another set).
	Adapters []AdapterUse
	// LoRAPath names one more LoRA adapter (.safetensors, a path the caller trusts), read and validated at each
	// call and applied at LoRAScale after Adapters; LoadAdapter once is faster for an adapter used again.
	LoRAPath  string
	LoRAScale float32
}

// AdapterUse is an adapter and the scale it is fused at (finite, any sign).
type AdapterUse struct {
	Adapter *Adapter
	Scale   float32
}

// Ptr returns a pointer to a copy of v, for the optional fields of a request: Guidance: cutenative.Ptr[float32](0).
func Ptr[T any](v T) *T { return &v }

// GenerateOptions are per-call options of GenerateWithOptions.
type GenerateOptions struct {
	// Progress, when set, receives the denoising steps done and their total while the image is made: polled
	// every ProgressInterval and reported when the count changed, then once more when the call ends (done ==
	// total after a successful call). Reports never overlap, come from goroutines other than the caller's
	// only while the call runs, and the last one returns before GenerateWithOptions does. Keep it short: a
	// slow Progress delays the next report, never the generation.
	Progress func(done, total uint64)
	// ProgressInterval is how often Progress is polled; 0: 100 ms (at least 1 ms).
	ProgressInterval time.Duration
}

// Image is an RGB8 image: Height rows of Width pixels, R, G, B bytes each (len(Pix) == Width*Height*3).
type Image struct {
	Width, Height int
	Pix           []byte
	// Timings is where the call that made the image spent its time.
	Timings Timings
}

// Timings is where one call spent its time, in milliseconds (cn_call_timings): the phases a model does not have
// are 0, and on a GPU each phase holds its device work.
type Timings struct {
	Prepare  float64 `json:"prepare"`  // checks and tokenizing
	Adapters float64 `json:"adapters"` // waiting for and switching to the request's adapter set
	Text     float64 `json:"text"`     // the text encoder
	Denoise  float64 `json:"denoise"`  // the denoising steps
	Decode   float64 `json:"decode"`   // the VAE decoder and the pixels' copy
	Total    float64 `json:"total"`    // the whole library call
}

func readTimings(o *C.cn_run_options) Timings {
	var t C.cn_call_timings
	C.cn_call_timings_init(&t)
	if C.cn_run_options_get_timings(o, &t, nil) != C.CN_STATUS_OK {
		return Timings{}
	}
	return Timings{Prepare: float64(t.prepare_ms), Adapters: float64(t.adapters_ms), Text: float64(t.text_ms),
		Denoise: float64(t.denoise_ms), Decode: float64(t.decode_ms), Total: float64(t.total_ms)}
}

// ToNRGBA copies the image into an opaque *image.NRGBA (what image/png encodes).
func (img *Image) ToNRGBA() *image.NRGBA {
	out := image.NewNRGBA(image.Rect(0, 0, img.Width, img.Height))
	for i, j := 0, 0; i+2 < len(img.Pix) && j+3 < len(out.Pix); i, j = i+3, j+4 {
		out.Pix[j], out.Pix[j+1], out.Pix[j+2], out.Pix[j+3] = img.Pix[i], img.Pix[i+1], img.Pix[i+2], 0xff
	}
	return out
}

func invalidGenerate(msg string) error {
	return &Error{Op: "Generate", Status: StatusInvalidArgument, Message: msg}
}

// cPrompt copies a prompt into C memory after the checks C strings need (free it with C.free).
func cPrompt(field, s string) (*C.char, error) {
	if len(s) > MaxPromptBytes {
		return nil, invalidGenerate(fmt.Sprintf("%s: %d bytes, longer than MaxPromptBytes (%d)", field, len(s), MaxPromptBytes))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, invalidGenerate(field + ": contains a NUL byte")
	}
	return C.CString(s), nil
}

func fitsInt32(v int) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

// buildGenerateRequest copies req into a new C request (the caller frees it) and returns the image size.
func buildGenerateRequest(req *GenerateRequest) (r *C.cn_generate_request, width, height int, err error) {
	width, height = req.Width, req.Height
	if width == 0 {
		width = DefaultImageSize
	}
	if height == 0 {
		height = DefaultImageSize
	}
	// What the C ABI cannot tell apart is checked here: its int32 fields, and -1 (CN_GENERATE_DEFAULT_STEPS)
	// and negative guidance, which mean "the model's default" there while this API uses 0 and nil for that.
	switch {
	case !fitsInt32(width) || !fitsInt32(height):
		return nil, 0, 0, invalidGenerate(fmt.Sprintf("size: %dx%d does not fit in int32 (each at most 4096)", width, height))
	case req.Steps < 0 || req.Steps > math.MaxInt32:
		return nil, 0, 0, invalidGenerate(fmt.Sprintf("steps: must be in [1, 1000] (0: the model's default), got %d", req.Steps))
	case req.Guidance != nil && *req.Guidance < 0:
		return nil, 0, 0, invalidGenerate(fmt.Sprintf("guidance: must be >= 0 (nil: the model's default), got %g", *req.Guidance))
	case req.Count < 0 || req.Count > MaxImagesPerCall:
		return nil, 0, 0, invalidGenerate(fmt.Sprintf("count: must be in [1, %d] (0: one), got %d", MaxImagesPerCall, req.Count))
	}
	count := max(req.Count, 1)
	prompt, err := cPrompt("prompt", req.Prompt)
	if err != nil {
		return nil, 0, 0, err
	}
	defer C.free(unsafe.Pointer(prompt))
	var neg *C.char
	if req.NegativePrompt != nil {
		if neg, err = cPrompt("negative_prompt", *req.NegativePrompt); err != nil {
			return nil, 0, 0, err
		}
		defer C.free(unsafe.Pointer(neg))
	}
	steps := C.int32_t(C.CN_GENERATE_DEFAULT_STEPS)
	if req.Steps != 0 {
		steps = C.int32_t(req.Steps)
	}
	guidance := C.float(C.CN_GENERATE_DEFAULT_GUIDANCE)
	if req.Guidance != nil {
		guidance = C.float(*req.Guidance)
	}
	truncation := 1.0
	if req.CFGTruncation != nil {
		truncation = *req.CFGTruncation
	}
	if err := call("Generate", func(e *C.cn_error) C.cn_status { return C.cn_generate_request_create(&r, e) }); err != nil {
		return nil, 0, 0, err
	}
	setters := []func(e *C.cn_error) C.cn_status{
		func(e *C.cn_error) C.cn_status { return C.cn_generate_request_set_prompt(r, prompt, neg, e) },
		func(e *C.cn_error) C.cn_status {
			return C.cn_generate_request_set_size(r, C.int32_t(width), C.int32_t(height), e)
		},
		func(e *C.cn_error) C.cn_status { return C.cn_generate_request_set_steps(r, steps, guidance, e) },
		func(e *C.cn_error) C.cn_status {
			return C.cn_generate_request_set_cfg(r, C.double(truncation), C.double(req.CFGNormalization), e)
		},
		func(e *C.cn_error) C.cn_status { return C.cn_generate_request_set_count(r, C.int32_t(count), e) },
	}
	for i, u := range req.Adapters {
		if u.Adapter == nil {
			C.cn_generate_request_free(r)
			return nil, 0, 0, invalidGenerate(fmt.Sprintf("adapters[%d]: nil", i))
		}
		scale := C.float(u.Scale)
		a := u.Adapter
		setters = append(setters, func(e *C.cn_error) C.cn_status {
			return a.with(func(p *C.cn_adapter) C.cn_status { return C.cn_generate_request_add_adapter(r, p, scale, e) })
		})
	}
	if req.LoRAPath != "" {
		lora := C.CString(req.LoRAPath)
		defer C.free(unsafe.Pointer(lora))
		setters = append(setters, func(e *C.cn_error) C.cn_status {
			return C.cn_generate_request_set_lora(r, lora, C.float(req.LoRAScale), e)
		})
	}
	for _, set := range setters {
		if err := call("Generate", set); err != nil {
			C.cn_generate_request_free(r)
			return nil, 0, 0, err
		}
	}
	return r, width, height, nil
}

// Generate makes one image (diffusion models; other kinds: ErrUnsupported). A ctx already done returns
// ctx.Err() at once. Cancelling ctx (or its deadline) during the call stops the library before text encoding,
// between denoising steps or before decoding; the error then matches both ctx.Err() and ErrCancelled
// (context.Canceled) or ErrDeadlineExceeded (context.DeadlineExceeded). A bad request is ErrInvalidArgument
// naming the field (ErrUnsupported for an adapter format the library refuses) and leaves the model usable.
func (m *Model) Generate(ctx context.Context, req *GenerateRequest) (*Image, error) {
	return m.GenerateWithOptions(ctx, req, nil)
}

// CheckGenerate checks req against m as Generate does before any work (sizes, the model's position range, the
// prompts' bytes, adapters; the prompt's token count against the caption range is Generate's, which tokenizes) and
// returns the image's size in bytes: a server refuses a bad request with the library's message before queueing it.
func (m *Model) CheckGenerate(req *GenerateRequest) (int, error) {
	if req == nil {
		return 0, invalidGenerate("request is nil")
	}
	r, _, _, err := buildGenerateRequest(req)
	if err != nil {
		return 0, err
	}
	defer C.cn_generate_request_free(r)
	var n C.size_t
	err = m.with(func(p *C.cn_model) error {
		return call("Generate", func(e *C.cn_error) C.cn_status { return C.cn_generate_get_size(p, r, &n, e) })
	})
	return int(n), err
}

// GenerateWithOptions is Generate with per-call options (progress reports); opts may be nil. req.Count must be 0
// or 1 (GenerateImages makes several).
func (m *Model) GenerateWithOptions(ctx context.Context, req *GenerateRequest, opts *GenerateOptions) (*Image, error) {
	if req != nil && req.Count > 1 {
		return nil, invalidGenerate(fmt.Sprintf("count: %d images need GenerateImages", req.Count))
	}
	imgs, err := m.GenerateImages(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	return imgs[0], nil
}

// GenerateImages makes req.Count images (one when 0) in one library call, as one batch; opts may be nil. Every
// image carries the call's timings.
func (m *Model) GenerateImages(ctx context.Context, req *GenerateRequest, opts *GenerateOptions) ([]*Image, error) {
	if req == nil {
		return nil, invalidGenerate("request is nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &GenerateOptions{}
	}
	every := opts.ProgressInterval
	if every == 0 {
		every = 100 * time.Millisecond
	}
	r, w, h, err := buildGenerateRequest(req)
	if err != nil {
		return nil, err
	}
	defer C.cn_generate_request_free(r)
	count := max(req.Count, 1)
	var imgs []*Image
	err = m.with(func(p *C.cn_model) error {
		var n C.size_t
		if err := call("Generate", func(e *C.cn_error) C.cn_status { return C.cn_generate_get_size(p, r, &n, e) }); err != nil {
			return err
		}
		if uint64(n) != uint64(w)*uint64(h)*3*uint64(count) {
			return &Error{Op: "Generate", Status: StatusInternal,
				Message: fmt.Sprintf("%d bytes for %d images of %dx%d RGB8", uint64(n), count, w, h)}
		}
		pix := make([]byte, int(n))
		var timings Timings
		if err := runWithProgress(ctx, "Generate", opts.Progress, every, func(o *C.cn_run_options, e *C.cn_error) C.cn_status {
			if st := C.cn_run_options_set_seed(o, C.uint64_t(req.Seed), e); st != C.CN_STATUS_OK {
				return st
			}
			st := C.cn_generate(p, r, o, (*C.uint8_t)(unsafe.Pointer(&pix[0])), n, e)
			timings = readTimings(o)
			return st
		}); err != nil {
			return err
		}
		one := w * h * 3
		for i := range count {
			imgs = append(imgs, &Image{Width: w, Height: h, Pix: pix[i*one : (i+1)*one : (i+1)*one], Timings: timings})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return imgs, nil
}
