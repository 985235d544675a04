package cutenative

/*
#include <stdlib.h>
#include "cutenative.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Adapter is a LoRA adapter file read once and validated against one model (Model.LoadAdapter). Requests name it
// with a scale (GenerateRequest.Adapters). Safe for concurrent use; Close releases the caller's reference (requests
// being built or running keep theirs).
type Adapter struct {
	mu     sync.RWMutex
	ptr    *C.cn_adapter
	closed bool
	info   AdapterInfo
}

// AdapterInfo describes a loaded adapter.
type AdapterInfo struct {
	Targets     uint64 // model weights it changes
	Patches     uint64 // patches (a fused qkv module counts three)
	MaxRank     int64
	FactorBytes uint64 // its factors, fp32, on the model's device
	Family      string // the key family recognised ("diffusers/peft", "kohya", ...)
}

// AdapterOptions are LoadAdapter's options.
type AdapterOptions struct {
	// AllowedDir, when set, is the directory the file must resolve into (symlinks and ".." resolved): a server
	// names only files it allows. "": the path is trusted as given.
	AllowedDir string
	// MaxFileBytes refuses larger files before they are read; 0: the library's default (2 GiB).
	MaxFileBytes uint64
}

// LoadAdapter reads and validates the adapter file at path against m (ErrUnsupported for models that take no
// adapters or formats the library refuses, ErrInvalidArgument naming the key for a file that does not fit).
func (m *Model) LoadAdapter(path string, opts *AdapterOptions) (*Adapter, error) {
	if opts == nil {
		opts = &AdapterOptions{}
	}
	var p C.cn_adapter_params
	C.cn_adapter_params_init(&p)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if opts.AllowedDir != "" {
		dir := C.CString(opts.AllowedDir)
		defer C.free(unsafe.Pointer(dir))
		p.allowed_dir = dir
	}
	p.max_file_bytes = C.uint64_t(opts.MaxFileBytes)
	a := &Adapter{}
	err := m.with(func(mp *C.cn_model) error {
		return call("LoadAdapter", func(e *C.cn_error) C.cn_status { return C.cn_adapter_load(mp, cpath, &p, &a.ptr, e) })
	})
	if err != nil {
		return nil, err
	}
	var info C.cn_adapter_info
	C.cn_adapter_info_init(&info)
	if err := call("LoadAdapter", func(e *C.cn_error) C.cn_status { return C.cn_adapter_get_info(a.ptr, &info, e) }); err != nil {
		C.cn_adapter_free(a.ptr)
		return nil, err
	}
	a.info = AdapterInfo{Targets: uint64(info.n_targets), Patches: uint64(info.n_patches), MaxRank: int64(info.max_rank),
		FactorBytes: uint64(info.factor_bytes), Family: C.GoString(info.family)}
	runtime.SetFinalizer(a, func(a *Adapter) { a.Close() })
	return a, nil
}

// Info describes the adapter.
func (a *Adapter) Info() AdapterInfo { return a.info }

// Close releases the caller's reference. Idempotent.
func (a *Adapter) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	C.cn_adapter_free(a.ptr)
	a.ptr = nil
	runtime.SetFinalizer(a, nil)
}

// with runs f with the adapter's pointer while holding the shared lock (a closed adapter passes NULL: the
// library answers INVALID_ARGUMENT naming it).
func (a *Adapter) with(f func(p *C.cn_adapter) C.cn_status) C.cn_status {
	a.mu.RLock()
	defer a.mu.RUnlock()
	st := f(a.ptr)
	runtime.KeepAlive(a)
	return st
}

// AdapterStats is a model's adapter state (Model.AdapterStats).
type AdapterStats struct {
	Switches      uint64  // adapter sets fused into the weights (a restore to none counts)
	SwitchSeconds float64 // host time those switches took, in total
	BackupBytes   uint64  // the kept originals of every weight an adapter has touched
	Touched       uint64  // weights the current set changes
}

// AdapterStats reports the model's adapter state (ErrUnsupported for models that take no adapters).
func (m *Model) AdapterStats() (AdapterStats, error) {
	var s C.cn_adapter_stats
	C.cn_adapter_stats_init(&s)
	err := m.with(func(p *C.cn_model) error {
		return call("AdapterStats", func(e *C.cn_error) C.cn_status { return C.cn_model_get_adapter_stats(p, &s, e) })
	})
	if err != nil {
		return AdapterStats{}, err
	}
	return AdapterStats{Switches: uint64(s.switches), SwitchSeconds: float64(s.switch_seconds), BackupBytes: uint64(s.backup_bytes),
		Touched: uint64(s.touched)}, nil
}
