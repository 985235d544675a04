// round_to<T>(v): v rounded to T's precision and back to float (the identity for float). The kernels' CPU paths
// use it to round where the bf16/fp16 ATen ops they reproduce round. Header-only, LibTorch's c10 types only.
#pragma once

namespace cn::kernels {

template <class T>
inline float round_to(float v) {
    return static_cast<float>(static_cast<T>(v));
}
template <>
inline float round_to<float>(float v) {
    return v;
}

}  // namespace cn::kernels
