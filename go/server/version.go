package server

import (
	"regexp"
	"runtime/debug"

	"github.com/cutenative/cutenative/go/cutenative"
)

// Version is the server binary's version; release builds set it with
// -ldflags "-X github.com/cutenative/cutenative/go/server.Version=v0.1.0". Left empty, BinaryVersion
// derives one from the Go build information.
var Version = ""

// BinaryVersion is the binary's version: Version when set, else the main module's version, else "devel"
// with the VCS revision the go command stamped (and "-dirty" for a modified tree) when it did.
func BinaryVersion() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += "+" + rev + dirty
	}
	return v
}

// LibraryBuild is cn_build_info taken apart: the library's version (cn_version), the torch version, whether
// the CUDA kernels are built, and the compiler (cn_build_info ends with the compiler's bare version string,
// which is not the library's version).
type LibraryBuild struct {
	Version, Torch, CUDAKernels, Compiler string
	Info                                  string // cn_build_info as it is
}

var buildInfoRE = regexp.MustCompile(`^cutenative (\S+) \(torch ([^,]+), CUDA kernels (on|off), (.*)\)$`)

// Library describes the loaded library.
func Library() LibraryBuild {
	b := LibraryBuild{Version: cutenative.Version(), Info: cutenative.BuildInfo()}
	if m := buildInfoRE.FindStringSubmatch(b.Info); m != nil {
		b.Torch, b.CUDAKernels, b.Compiler = m[2], m[3], m[4]
		if c := b.Compiler; c != "" && c[0] >= '0' && c[0] <= '9' {
			b.Compiler = "gcc " + c // GCC's __VERSION__ is a bare "13.2.0" (Clang's names itself)
		}
	}
	return b
}

// String is a one-line description that names each part.
func (b LibraryBuild) String() string {
	if b.Torch == "" {
		return "libcutenative " + b.Version + " (" + b.Info + ")"
	}
	return "libcutenative " + b.Version + " (torch " + b.Torch + ", CUDA kernels " + b.CUDAKernels + ", compiled by " + b.Compiler + ")"
}
