#include "core/models/zimage/zimage_geometry.h"

#include <algorithm>

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>

#include "core/layers/rope.h"

namespace cn::zimage {

at::Tensor grid_ids(int64_t f, int64_t h, int64_t w, int64_t f0) {
    at::Tensor ids = at::empty({f * h * w, 3}, at::TensorOptions().dtype(at::kInt));
    int32_t* p = ids.data_ptr<int32_t>();
    for (int64_t a = 0; a < f; ++a) {
        for (int64_t b = 0; b < h; ++b) {
            for (int64_t c = 0; c < w; ++c) {
                *p++ = static_cast<int32_t>(f0 + a);
                *p++ = static_cast<int32_t>(b);
                *p++ = static_cast<int32_t>(c);
            }
        }
    }
    return ids;
}

at::Tensor pad_batch(const std::vector<at::Tensor>& items) {
    int64_t max_len = 0;
    for (const auto& t : items) max_len = std::max(max_len, t.size(0));
    std::vector<at::Tensor> padded;
    for (const auto& t : items) {
        if (t.size(0) == max_len) {
            padded.push_back(t);
        } else {
            std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
            shape[0] = max_len - t.size(0);
            padded.push_back(at::cat({t, at::zeros(shape, t.options())}, 0));
        }
    }
    return at::stack(padded, 0);
}

at::Tensor key_mask(const std::vector<int64_t>& lens, c10::Device device) {
    const int64_t max_len = lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
    if (std::all_of(lens.begin(), lens.end(), [&](int64_t n) { return n == max_len; })) return at::Tensor();
    const auto B = static_cast<int64_t>(lens.size());
    at::Tensor m = at::zeros({B, max_len}, at::TensorOptions().dtype(at::kBool));
    for (int64_t i = 0; i < B; ++i) m[i].slice(0, 0, lens[static_cast<size_t>(i)]).fill_(true);
    return m.to(device).view({B, 1, 1, max_len});
}

at::Tensor rope_factors(const std::vector<at::Tensor>& rope, const std::vector<at::Tensor>& ids) {
    std::vector<at::Tensor> f;
    for (const auto& i : ids) f.push_back(layers::complex_rope_gather(rope, i.to(rope[0].device())));
    return pad_batch(f);
}

std::vector<int64_t> DitGeometry::key() const {
    std::vector<int64_t> k{batch, h, w};
    k.insert(k.end(), cap_lens.begin(), cap_lens.end());
    return k;
}

DitGeometry make_geometry(const std::vector<at::Tensor>& rope, int64_t batch, int64_t h, int64_t w, const std::vector<int64_t>& cap_lens) {
    DitGeometry g;
    g.batch = batch;
    g.h = h;
    g.w = w;
    g.cap_lens = cap_lens;
    const int64_t Ht = h / 2, Wt = w / 2;
    g.tokens = Ht * Wt;
    g.pad = pad_len(g.tokens);
    const int64_t Np = g.tokens + g.pad;
    const c10::Device dev = rope[0].device();
    if (g.pad > 0) {
        at::Tensor m = at::zeros({Np, 1}, at::TensorOptions().dtype(at::kBool));
        m.slice(0, g.tokens).fill_(true);
        g.img_pad_rows = m.repeat({batch, 1}).to(dev);
    }
    std::vector<at::Tensor> img_ids, uni_ids;
    std::vector<int64_t> uni_lens;
    for (int64_t i = 0; i < batch; ++i) {
        const int64_t Lc = cap_lens[static_cast<size_t>(i)];
        at::Tensor ids = grid_ids(1, Ht, Wt, Lc + 1);
        if (g.pad > 0) ids = at::cat({ids, at::zeros({g.pad, 3}, ids.options())}, 0);
        img_ids.push_back(ids);
        uni_ids.push_back(at::cat({ids, grid_ids(Lc, 1, 1, 1)}, 0));
        uni_lens.push_back(Np + Lc);
    }
    g.img_freqs = rope_factors(rope, img_ids);
    g.uni_freqs = rope_factors(rope, uni_ids);
    g.uni_mask = key_mask(uni_lens, dev);
    return g;
}

}  // namespace cn::zimage
