//go:build !amd64

package lora

const useAVX2, useAVX2FMA = false, false

func dotRowsI8AVX2(m *int8, q *int16, out *int32, rows, stride int) { panic("lora: no AVX2 kernel") }

func dot64AVX2(a, b *float32, n int) float64 { panic("lora: no AVX2 kernel") }
