#include "core/layers/linear.h"

#include <vector>

#include <ATen/ops/cat.h>
#include <ATen/ops/linear.h>

#include "core/common/status.h"
#include "core/runtime/weights.h"

namespace cn::layers {

at::Tensor linear(const at::Tensor& x, const Linear& l) { return at::linear(x, l.w, l.b); }

void declare_linear(Weights& w, Linear& dst, const std::string& prefix, int64_t out, int64_t in, bool bias) {
    w.declare(dst.w, prefix + ".weight", {out, in});
    if (bias) w.declare(dst.b, prefix + ".bias", {out});
}

Linear fuse_rows(std::initializer_list<Linear*> parts) { return fuse_rows(std::vector<Linear*>(parts)); }

Linear fuse_rows(const std::vector<Linear*>& parts) {
    std::vector<at::Tensor> ws, bs;
    for (const Linear* l : parts) {
        ws.push_back(l->w);
        if (l->b.defined()) bs.push_back(l->b);
    }
    const bool bias = bs.size() == ws.size();
    if (!bias && !bs.empty()) fail(Status::kInternal, "fuse_rows: some parts have a bias and some do not");
    Linear f{at::cat(ws, 0), bias ? at::cat(bs, 0) : at::Tensor()};
    int64_t row = 0;
    for (Linear* l : parts) {
        const int64_t n = l->w.size(0);
        l->w = f.w.narrow(0, row, n);
        if (bias) l->b = f.b.narrow(0, row, n);
        row += n;
    }
    return f;
}

}  // namespace cn::layers
