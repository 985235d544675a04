package lora

// useAVX2 is set when the CPU and the OS support AVX2 (the screening kernel's assembly), useAVX2FMA
// when FMA too (dot64's).
var useAVX2, useAVX2FMA = detectAVX2()

// dot64AVX2 is dot64's lane sum for n % 16 == 0, n > 0 (kernel_amd64.s).
//
//go:noescape
func dot64AVX2(a, b *float32, n int) float64

// dotRowsI8AVX2 is screenDots for stride % 32 == 0 (kernel_amd64.s).
//
//go:noescape
func dotRowsI8AVX2(m *int8, q *int16, out *int32, rows, stride int)

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

func detectAVX2() (avx2, avx2fma bool) {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false, false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if ecx1&osxsave == 0 || ecx1&avx == 0 {
		return false, false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // the OS saves XMM and YMM state
		return false, false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	avx2 = ebx7&(1<<5) != 0
	return avx2, avx2 && ecx1&fma != 0
}
