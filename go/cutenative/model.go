package cutenative

/*
#include <stdlib.h>
#include "cutenative.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Options of Open. The zero value means CPU, fp32, eager.
type Options struct {
	Device       string // "cpu" (default), "cuda" or "cuda:N"
	DType        string // "f32" (default), "bf16" or "f16"
	Mode         string // one of Modes(): "eager" (default), "graph" or "fused"
	Threads      int    // CPU intra-op threads for the process; 0 leaves it as is
	CheckTensors bool   // reject weights holding NaN/Inf
	MmapWeights  bool   // CPU weights alias the file mapping (the file must not change while loaded)
}

// Info is what the library reports about a loaded model (cn_model_info).
type Info struct {
	Kind             string
	Device           string
	DType            string
	Mode             string
	Parameters       uint64
	WeightBytes      uint64
	GraphPoolBytes   uint64
	WorkspaceBytes   uint64
	ContextLength    int64
	NativeHorizon    int64
	MaxHorizon       int64
	DefaultQuantiles int64
	EmbeddingDim     int64
	MaxTokens        int64 // embedding and image models: tokens per text (longer is truncated)
	// Image models (since ABI 0.3): width and height must be multiples of ImageSizeMultiple; DefaultSteps and
	// DefaultGuidance are what a GenerateRequest with Steps 0 and Guidance nil gets.
	ImageSizeMultiple int64
	DefaultSteps      int64
	DefaultGuidance   float32
}

// Model is a loaded model. Safe for concurrent use; Close releases it.
type Model struct {
	mu     sync.RWMutex // held shared by calls, exclusively by Close
	ptr    *C.cn_model
	closed bool
}

func parseDevice(s string) (C.int32_t, C.int32_t, error) {
	switch {
	case s == "" || s == "cpu":
		return C.CN_DEVICE_CPU, 0, nil
	case s == "cuda":
		return C.CN_DEVICE_CUDA, 0, nil
	case strings.HasPrefix(s, "cuda:"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "cuda:"))
		if err != nil || n < 0 {
			return 0, 0, &Error{Op: "Open", Status: StatusInvalidArgument, Message: "device: bad CUDA index in " + strconv.Quote(s)}
		}
		return C.CN_DEVICE_CUDA, C.int32_t(n), nil
	}
	return 0, 0, &Error{Op: "Open", Status: StatusInvalidArgument, Message: "device: want cpu, cuda or cuda:N, got " + strconv.Quote(s)}
}

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// Open loads the model in dir (a Hugging Face style directory: config.json + safetensors).
func Open(dir string, opts *Options) (*Model, error) {
	if err := checkABI(ABIVersion()); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &Options{}
	}
	var p C.cn_model_params
	C.cn_model_params_init(&p)
	dev, idx, err := parseDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	p.device_type, p.device_index = dev, idx
	if opts.DType != "" {
		cs := C.CString(opts.DType)
		defer C.free(unsafe.Pointer(cs))
		var dt C.cn_dtype
		if C.cn_dtype_from_name(cs, &dt) != C.CN_STATUS_OK {
			return nil, &Error{Op: "Open", Status: StatusInvalidArgument, Message: "dtype: want f32, bf16 or f16, got " + strconv.Quote(opts.DType)}
		}
		p.dtype = C.int32_t(dt)
	}
	if opts.Mode != "" {
		cs := C.CString(opts.Mode)
		defer C.free(unsafe.Pointer(cs))
		var md C.cn_mode
		if C.cn_mode_from_name(cs, &md) != C.CN_STATUS_OK {
			return nil, &Error{Op: "Open", Status: StatusInvalidArgument, Message: "mode: want " + modeList() + ", got " + strconv.Quote(opts.Mode)}
		}
		p.mode = C.int32_t(md)
	}
	if opts.Threads < 0 {
		return nil, &Error{Op: "Open", Status: StatusInvalidArgument, Message: "threads: must be >= 0"}
	}
	p.n_threads = C.int32_t(opts.Threads)
	p.check_tensors = cBool(opts.CheckTensors)
	p.mmap_weights = cBool(opts.MmapWeights)

	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	m := &Model{}
	err = call("Open", func(e *C.cn_error) C.cn_status { return C.cn_model_create(cdir, &p, &m.ptr, e) })
	if err != nil {
		return nil, err
	}
	// A safety net only: Close is the contract. The cleanup frees a model that was never closed.
	runtime.SetFinalizer(m, func(m *Model) { _ = m.Close() })
	return m, nil
}

// Close frees the model; it waits for calls in flight. Idempotent.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	C.cn_model_free(m.ptr)
	m.ptr = nil
	runtime.SetFinalizer(m, nil)
	return nil
}

// with runs f with the model pointer while holding the shared lock.
func (m *Model) with(f func(p *C.cn_model) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	err := f(m.ptr)
	runtime.KeepAlive(m)
	return err
}

// Info reports the model's facts.
func (m *Model) Info() (Info, error) {
	var ci C.cn_model_info
	C.cn_model_info_init(&ci)
	err := m.with(func(p *C.cn_model) error {
		return call("Info", func(e *C.cn_error) C.cn_status { return C.cn_model_get_info(p, &ci, e) })
	})
	if err != nil {
		return Info{}, err
	}
	dev := C.GoString(C.cn_device_type_name(C.cn_device_type(ci.device_type)))
	if ci.device_type == C.CN_DEVICE_CUDA {
		dev = fmt.Sprintf("%s:%d", dev, int(ci.device_index))
	}
	return Info{
		Kind:             C.GoString(C.cn_model_kind_name(C.cn_model_kind(ci.kind))),
		Device:           dev,
		DType:            C.GoString(C.cn_dtype_name(C.cn_dtype(ci.dtype))),
		Mode:             C.GoString(C.cn_mode_name(C.cn_mode(ci.mode))),
		Parameters:       uint64(ci.n_parameters),
		WeightBytes:      uint64(ci.weight_bytes),
		GraphPoolBytes:   uint64(ci.graph_pool_bytes),
		WorkspaceBytes:   uint64(ci.workspace_bytes),
		ContextLength:    int64(ci.context_length),
		NativeHorizon:    int64(ci.native_horizon),
		MaxHorizon:       int64(ci.max_horizon),
		DefaultQuantiles: int64(ci.n_default_quantiles),
		EmbeddingDim:     int64(ci.embedding_dim),
		MaxTokens:        int64(ci.max_tokens),

		ImageSizeMultiple: int64(ci.image_size_multiple),
		DefaultSteps:      int64(ci.default_steps),
		DefaultGuidance:   float32(ci.default_guidance),
	}, nil
}

// Quantiles returns the model's own quantile levels (forecasters with quantile heads; else ErrUnsupported).
func (m *Model) Quantiles() ([]float32, error) {
	var out []float32
	err := m.with(func(p *C.cn_model) error {
		var err error
		out, err = quantilesOf(p)
		return err
	})
	return out, err
}

func quantilesOf(p *C.cn_model) ([]float32, error) {
	var n C.size_t
	if err := call("Quantiles", func(e *C.cn_error) C.cn_status { return C.cn_model_get_quantiles(p, nil, 0, &n, e) }); err != nil {
		return nil, err
	}
	out := make([]float32, int(n))
	if n == 0 {
		return out, nil
	}
	err := call("Quantiles", func(e *C.cn_error) C.cn_status {
		return C.cn_model_get_quantiles(p, (*C.float)(unsafe.Pointer(&out[0])), n, &n, e)
	})
	return out, err
}

// Describe returns the library's JSON description of the model (kind, device, memory, config).
func (m *Model) Describe() (string, error) {
	var s string
	err := m.with(func(p *C.cn_model) error {
		var n C.size_t
		if err := call("Describe", func(e *C.cn_error) C.cn_status { return C.cn_model_describe(p, nil, 0, &n, e) }); err != nil {
			return err
		}
		buf := make([]byte, int(n))
		if err := call("Describe", func(e *C.cn_error) C.cn_status {
			return C.cn_model_describe(p, (*C.char)(unsafe.Pointer(&buf[0])), n, &n, e)
		}); err != nil {
			return err
		}
		s = string(buf[:len(buf)-1])
		return nil
	})
	return s, err
}

// SetMode switches the execution mode (one of Modes()). ErrBusy while a call is running.
func (m *Model) SetMode(mode string) error {
	cs := C.CString(mode)
	defer C.free(unsafe.Pointer(cs))
	var md C.cn_mode
	if C.cn_mode_from_name(cs, &md) != C.CN_STATUS_OK {
		return &Error{Op: "SetMode", Status: StatusInvalidArgument, Message: "mode: want " + modeList() + ", got " + strconv.Quote(mode)}
	}
	return m.with(func(p *C.cn_model) error {
		return call("SetMode", func(e *C.cn_error) C.cn_status { return C.cn_model_set_mode(p, md, e) })
	})
}

// Modes returns the names of the library's execution modes in enum order ("eager", "graph", "fused"): the
// library's mode table (core/runtime/modes.cpp) is the one list; this reads it through cn_mode_name.
func Modes() []string {
	var out []string
	for i := 0; ; i++ {
		name := C.GoString(C.cn_mode_name(C.cn_mode(i)))
		if name == "unknown" {
			return out
		}
		out = append(out, name)
	}
}

// modeList is Modes() for messages: "eager, graph or fused".
func modeList() string {
	m := Modes()
	if len(m) < 2 {
		return strings.Join(m, "")
	}
	return strings.Join(m[:len(m)-1], ", ") + " or " + m[len(m)-1]
}
