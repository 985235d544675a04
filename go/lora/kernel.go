package lora

// The screening kernel: integer dot products of an int8 matrix (one padded row per catalog entry) with an
// int16 query. Integer arithmetic is exact, so the assembly and the Go version give identical results.

// screenDots sets out[r] = sum_j m[r*stride+j] * q[j] for r < len(out). stride is a multiple of
// quantStride; m holds len(out)*stride values, q holds stride.
func screenDots(m []int8, q []int16, out []int32, stride int) {
	if len(out) == 0 {
		return
	}
	_ = m[len(out)*stride-1] // bounds checked here, once, for the assembly
	_ = q[stride-1]
	if useAVX2 && stride%32 == 0 {
		dotRowsI8AVX2(&m[0], &q[0], &out[0], len(out), stride)
		return
	}
	dotRowsI8Go(m, q, out, stride)
}

func dotRowsI8Go(m []int8, q []int16, out []int32, stride int) {
	q = q[:stride]
	for r := range out {
		row := m[r*stride : (r+1)*stride]
		var s0, s1, s2, s3 int32
		for j := 0; j+4 <= len(row); j += 4 {
			s0 += int32(row[j]) * int32(q[j])
			s1 += int32(row[j+1]) * int32(q[j+1])
			s2 += int32(row[j+2]) * int32(q[j+2])
			s3 += int32(row[j+3]) * int32(q[j+3])
		}
		out[r] = (s0 + s1) + (s2 + s3)
	}
}

// dot64 is the exact score of two float32 vectors: float64 products (exact: 24-bit mantissas) summed in
// 16 float64 lanes (lane m takes elements j = m mod 16 of the first len&^15), the lanes reduced in a
// fixed order, then the tail added in order. The AVX2 version follows the same order; a fused
// multiply-add rounds like the separate add because the product is exact, so both give the same bits.
func dot64(a, b []float32) float64 {
	b = b[:len(a)]
	n16 := len(a) &^ 15
	var s float64
	if useAVX2FMA && n16 > 0 {
		s = dot64AVX2(&a[0], &b[0], n16)
	} else {
		s = dot64Lanes(a[:n16], b[:n16])
	}
	for j := n16; j < len(a); j++ {
		s += float64(a[j]) * float64(b[j])
	}
	return s
}

func dot64Lanes(a, b []float32) float64 {
	var l [16]float64
	for j := 0; j+16 <= len(a); j += 16 {
		x, y := a[j:j+16:j+16], b[j:j+16:j+16]
		for m := range l {
			l[m] += float64(x[m]) * float64(y[m])
		}
	}
	// The assembly's reduction: registers Y0..Y3 hold lanes 0-3, 4-7, 8-11, 12-15;
	// (Y0+Y1)+(Y2+Y3) lane-wise, then (v0+v2)+(v1+v3).
	var v [4]float64
	for m := range v {
		v[m] = (l[m] + l[4+m]) + (l[8+m] + l[12+m])
	}
	return (v[0] + v[2]) + (v[1] + v[3])
}
