#include "core/models/zimage/zimage_vae.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/group_norm.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/upsample_nearest2d.h>

#include "core/layers/attention.h"
#include "core/layers/linear.h"
#include "core/runtime/weights.h"

namespace cn::zimage {

VaeDecoder::VaeDecoder(const VaeConfig& c, Weights& w) : c_(c) {
    for (const auto& [name, ref] : w.checkpoint().tensors()) {
        (void)ref;
        if (name.rfind("encoder.", 0) == 0 || name.rfind("quant_conv.", 0) == 0) w.allow_unused(name);
        if (!c.use_post_quant_conv && name.rfind("post_quant_conv.", 0) == 0) w.allow_unused(name);
    }
    auto conv = [&](Conv& dst, const std::string& p, int64_t out, int64_t in, int64_t k) {
        w.declare(dst.w, p + ".weight", {out, in, k, k});
        w.declare(dst.b, p + ".bias", {out});
    };
    auto norm = [&](GroupNorm& dst, const std::string& p, int64_t ch) {
        w.declare(dst.w, p + ".weight", {ch});
        w.declare(dst.b, p + ".bias", {ch});
    };
    auto res = [&](Resnet& r, const std::string& p, int64_t in, int64_t out) {
        norm(r.norm1, p + ".norm1", in);
        conv(r.conv1, p + ".conv1", out, in, 3);
        norm(r.norm2, p + ".norm2", out);
        conv(r.conv2, p + ".conv2", out, out, 3);
        if (in != out) conv(r.shortcut, p + ".conv_shortcut", out, in, 1);
    };
    const auto& ch = c.block_out_channels;
    const int64_t top = ch.back(), L = c.latent_channels;
    if (c.use_post_quant_conv) conv(post_quant_, "post_quant_conv", L, L, 1);
    conv(conv_in_, "decoder.conv_in", top, L, 3);
    res(mid1_, "decoder.mid_block.resnets.0", top, top);
    res(mid2_, "decoder.mid_block.resnets.1", top, top);
    if (c.mid_block_add_attention) {
        mid_attn_ = std::make_unique<Attention>();
        const std::string p = "decoder.mid_block.attentions.0";
        norm(mid_attn_->norm, p + ".group_norm", top);
        for (auto [dst, n] :
             {std::pair{&mid_attn_->q, "to_q"}, {&mid_attn_->k, "to_k"}, {&mid_attn_->v, "to_v"}, {&mid_attn_->o, "to_out.0"}}) {
            w.declare(dst->w, p + "." + n + ".weight", {top, top});
            w.declare(dst->b, p + "." + n + ".bias", {top});
        }
    }
    // Up blocks run the channels in reverse: block i outputs reversed[i]; its first resnet takes the previous
    // block's output (the mid block's for i = 0).
    const size_t n = ch.size();
    up_.resize(n);
    int64_t prev = top;
    for (size_t i = 0; i < n; ++i) {
        const int64_t out = ch[n - 1 - i];
        UpBlock& b = up_[i];
        b.resnets.resize(static_cast<size_t>(c.layers_per_block + 1));
        for (size_t j = 0; j < b.resnets.size(); ++j) {
            res(b.resnets[j], "decoder.up_blocks." + std::to_string(i) + ".resnets." + std::to_string(j), j == 0 ? prev : out, out);
        }
        if (i + 1 < n) conv(b.upsample, "decoder.up_blocks." + std::to_string(i) + ".upsamplers.0.conv", out, out, 3);
        prev = out;
    }
    norm(norm_out_, "decoder.conv_norm_out", ch.front());
    conv(conv_out_, "decoder.conv_out", c.out_channels, ch.front(), 3);
}

void VaeDecoder::use_channels_last() {
    auto cl = [](Conv& c) {
        if (c.w.defined()) c.w = c.w.contiguous(at::MemoryFormat::ChannelsLast);
    };
    cl(post_quant_);
    cl(conv_in_);
    cl(conv_out_);
    for (Resnet* r : {&mid1_, &mid2_}) {
        cl(r->conv1);
        cl(r->conv2);
        cl(r->shortcut);
    }
    for (UpBlock& b : up_) {
        for (Resnet& r : b.resnets) {
            cl(r.conv1);
            cl(r.conv2);
            cl(r.shortcut);
        }
        cl(b.upsample);
    }
    channels_last_ = true;
}

at::Tensor VaeDecoder::group_norm(const GroupNorm& n, const at::Tensor& x) const {
    return at::group_norm(x, c_.norm_num_groups, n.w, n.b, 1e-6);
}

at::Tensor VaeDecoder::resnet(const Resnet& r, const at::Tensor& x) const {
    at::Tensor h = at::conv2d(at::silu(group_norm(r.norm1, x)), r.conv1.w, r.conv1.b, 1, 1);
    h = at::conv2d(at::silu(group_norm(r.norm2, h)), r.conv2.w, r.conv2.b, 1, 1);
    const at::Tensor in = r.shortcut.w.defined() ? at::conv2d(x, r.shortcut.w, r.shortcut.b) : x;
    return (in + h) / 1.0;  // output_scale_factor 1 (an exact no-op, kept as the reference's op)
}

at::Tensor VaeDecoder::attention(const Attention& a, const at::Tensor& x) const {
    // AttnProcessor2_0 on a 4-D input: [B, C, H, W] -> [B, HW, C]; GroupNorm over channels; one head of C dims.
    const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    at::Tensor h = x.view({B, C, H * W}).transpose(1, 2);
    h = group_norm(a.norm, h.transpose(1, 2)).transpose(1, 2);
    auto lin = [&](const Conv& l, const at::Tensor& t) { return layers::linear(t, layers::Linear{l.w, l.b}); };
    const at::Tensor q = lin(a.q, h).view({B, -1, 1, C}).transpose(1, 2);
    const at::Tensor k = lin(a.k, h).view({B, -1, 1, C}).transpose(1, 2);
    const at::Tensor v = lin(a.v, h).view({B, -1, 1, C}).transpose(1, 2);
    at::Tensor o = layers::attention(q, k, v).transpose(1, 2).reshape({B, -1, C});
    o = lin(a.o, o).transpose(-1, -2).reshape({B, C, H, W});
    return (o + x) / 1.0;  // residual connection, rescale_output_factor 1
}

at::Tensor VaeDecoder::decode(const at::Tensor& z_in) const {
    at::Tensor z = channels_last_ ? z_in.contiguous(at::MemoryFormat::ChannelsLast) : z_in;
    if (c_.use_post_quant_conv) z = at::conv2d(z, post_quant_.w, post_quant_.b);
    at::Tensor x = at::conv2d(z, conv_in_.w, conv_in_.b, 1, 1);
    x = resnet(mid1_, x);
    if (mid_attn_) {
        x = attention(*mid_attn_, channels_last_ ? x.contiguous() : x);
        if (channels_last_) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    }
    x = resnet(mid2_, x);
    for (const UpBlock& b : up_) {
        for (const Resnet& r : b.resnets) x = resnet(r, x);
        if (b.upsample.w.defined()) {
            x = at::upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2});
            x = at::conv2d(x, b.upsample.w, b.upsample.b, 1, 1);
        }
    }
    x = at::silu(group_norm(norm_out_, x));
    const at::Tensor out = at::conv2d(x, conv_out_.w, conv_out_.b, 1, 1);
    return channels_last_ ? out.contiguous() : out;
}

}  // namespace cn::zimage
