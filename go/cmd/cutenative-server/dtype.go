package main

import (
	"bufio"
	"io"
	"os"
	"strings"
)

// hostCPUFlags is cpuFlags; tests replace it to model another CPU.
var hostCPUFlags = cpuFlags

// cpuFlags reads the "flags" line of /proc/cpuinfo (nil where there is none: another OS, an ARM kernel's
// "Features", an unreadable file).
func cpuFlags() map[string]bool {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseCPUFlags(f)
}

// parseCPUFlags returns the flags of the first "flags : ..." line of a /proc/cpuinfo text.
func parseCPUFlags(r io.Reader) map[string]bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		flags := map[string]bool{}
		for _, f := range strings.Fields(val) {
			flags[f] = true
		}
		return flags
	}
	return nil
}

// slowDTypeWarning says why dtype runs slower than f32 on this host's CPU, or "" when it is not known to (f32;
// a device other than the CPU; a CPU with AMX tiles for the dtype, not measured; flags unknown). The factors
// were measured with cutenative-load on the embedded default model, one client (README, "Defaults"): on an AMD
// EPYC with avx512_bf16 and no AMX, bf16 served 1.9-2.8x fewer requests per second than f32 and f16 1.9-2.4x;
// on a CPU without avx512_bf16, bf16 was 4-6x slower (issue 20).
func slowDTypeWarning(device, dtype string, flags map[string]bool) string {
	if device != "cpu" || flags == nil {
		return ""
	}
	switch dtype {
	case "bf16":
		switch {
		case flags["amx_bf16"]:
			return ""
		case flags["avx512_bf16"]:
			return "bf16 on a CPU without AMX (avx512_bf16 but no amx_bf16 in /proc/cpuinfo) measured about 2x " +
				"slower than f32 on the default model; use -dtype f32"
		}
		return "bf16 on a CPU without native bf16 (no avx512_bf16 or amx_bf16 in /proc/cpuinfo) is converted in " +
			"software and measured 4-6x slower than f32; use -dtype f32"
	case "f16":
		if flags["amx_fp16"] {
			return ""
		}
		return "f16 on a CPU without AMX f16 (no amx_fp16 in /proc/cpuinfo) measured about 2x slower than f32 on " +
			"the default model; use -dtype f32"
	}
	return ""
}
