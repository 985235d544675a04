// The decoder half of diffusers' AutoencoderKL as the Z-Image pipeline runs it (the Flux VAE in the real model):
// [post_quant_conv] -> conv_in -> mid block (resnet, single-head attention over all pixels, resnet) -> up blocks
// (layers_per_block + 1 resnets each; every block but the last ends with nearest x2 upsampling and a 3x3 conv)
// -> GroupNorm -> SiLU -> conv_out. ResnetBlock2D: shortcut (1x1 conv when channels change) + conv2(silu(GN2(
// conv1(silu(GN1(x)))))); every GroupNorm has eps 1e-6. Weights "decoder.*" (and "post_quant_conv.*" when the
// config uses it); encoder.* and quant_conv.* are accepted and not loaded. Op for op in the weights' dtype, as
// diffusers runs it.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/models/zimage/zimage_config.h"

namespace cn {
class Weights;
}

namespace cn::zimage {

class VaeDecoder {
public:
    VaeDecoder(const VaeConfig& c, Weights& w);
    // z: [B, latent_channels, h, w] already scaled and shifted; returns [B, 3, h * scale, w * scale].
    at::Tensor decode(const at::Tensor& z) const;
    // Experimental (CN_ZIMAGE_VAE_LAYOUT=nhwc, off by default): the 3x3/1x1 convolutions' weights in channels-last
    // layout and the activations with them (cuDNN's NHWC kernels); the output returns to NCHW. Not the reference's
    // layout: results differ from diffusers' at rounding level. Call once after loading, before any decode.
    void use_channels_last();

private:
    struct Conv {
        at::Tensor w, b;
    };
    struct GroupNorm {
        at::Tensor w, b;
    };
    struct Resnet {
        GroupNorm norm1, norm2;
        Conv conv1, conv2, shortcut;  // shortcut undefined when channels stay
    };
    struct Attention {
        GroupNorm norm;
        Conv q, k, v, o;  // Linear weights [C, C]
    };
    struct UpBlock {
        std::vector<Resnet> resnets;
        Conv upsample;  // undefined on the last block
    };
    at::Tensor resnet(const Resnet& r, const at::Tensor& x) const;
    at::Tensor attention(const Attention& a, const at::Tensor& x) const;
    at::Tensor group_norm(const GroupNorm& n, const at::Tensor& x) const;

    VaeConfig c_;
    bool channels_last_ = false;
    Conv post_quant_, conv_in_, conv_out_;
    Resnet mid1_, mid2_;
    std::unique_ptr<Attention> mid_attn_;
    std::vector<UpBlock> up_;
    GroupNorm norm_out_;
};

}  // namespace cn::zimage
