// The Kronos weight lists: every tensor of the tokenizer and the predictor declared once, then validated and
// loaded, and the derived tensors (rotary formula, fused GEMM weights) built.
#include "core/models/kronos/kronos_weights.h"

#include <memory>

#include "core/format/checkpoint.h"
#include "core/layers/rope.h"
#include "core/runtime/weights.h"

namespace cn::kronos {
namespace {

// The rotary inverse frequencies: a persistent buffer of RotaryPositionalEmbedding, so checkpoints may carry
// it; absent, the reference's formula (layers::rope_inv_freq). Not a parameter.
constexpr WeightFlags kRotaryBuffer{/*optional=*/true, /*buffer=*/true, /*dtype=*/c10::kFloat};
constexpr double kRopeTheta = 10000;

void declare_block(Weights& w, Block& b, const std::string& p, int64_t heads, int64_t d, int64_t ff) {
    w.declare(b.norm1, p + ".norm1.weight", {d});
    w.declare(b.norm2, p + ".norm2.weight", {d});
    layers::declare_linear(w, b.q, p + ".self_attn.q_proj", d, d);
    layers::declare_linear(w, b.k, p + ".self_attn.k_proj", d, d);
    layers::declare_linear(w, b.v, p + ".self_attn.v_proj", d, d);
    layers::declare_linear(w, b.o, p + ".self_attn.out_proj", d, d);
    layers::declare_linear(w, b.w1, p + ".ffn.w1", ff, d, /*bias=*/false);
    layers::declare_linear(w, b.w3, p + ".ffn.w3", ff, d, /*bias=*/false);
    layers::declare_linear(w, b.w2, p + ".ffn.w2", d, ff, /*bias=*/false);
    w.declare(b.inv_freq, p + ".self_attn.rotary.inv_freq", {d / heads / 2}, kRotaryBuffer);
    b.heads = heads;
}

// After load_all: the formula's rotary table where the checkpoint had none, and with `fused` the fused QKV and
// w1|w3 weights (only the kernels path on CUDA uses them; elsewhere they would only cost memory and break mmap
// aliasing).
void finish_block(Block& b, int64_t d, bool fused, c10::Device device) {
    if (!b.inv_freq.defined()) b.inv_freq = layers::rope_inv_freq(d / b.heads, kRopeTheta, device);
    if (fused) {
        b.qkv = layers::fuse_rows({&b.q, &b.k, &b.v});
        b.w13 = layers::fuse_rows({&b.w1, &b.w3});
    }
}

// Buffers and training-only tensors a checkpoint may carry.
void allow_extras(Weights& w, const format::Checkpoint& c) {
    for (const auto& [name, ref] : c.tensors()) {
        if (name.find("rotary.inv_freq") != std::string::npos || name.rfind("tokenizer.bsq.", 0) == 0 ||
            name.rfind("post_quant_embed_pre.", 0) == 0) {
            w.allow_unused(name);
        }
    }
}

void declare_tokenizer(Weights& w, const TokenizerConfig& k, TokenizerWeights& t) {
    layers::declare_linear(w, t.embed, "embed", k.d_model, k.d_in);
    layers::declare_linear(w, t.head, "head", k.d_in, k.d_model);
    layers::declare_linear(w, t.quant_embed, "quant_embed", k.s1_bits + k.s2_bits, k.d_model);
    layers::declare_linear(w, t.post_quant_embed, "post_quant_embed", k.d_model, k.s1_bits + k.s2_bits);
    t.encoder.resize(static_cast<size_t>(k.enc_blocks));  // sized before declaring into them
    t.decoder.resize(static_cast<size_t>(k.dec_blocks));
    for (int64_t i = 0; i < k.enc_blocks; ++i) {
        declare_block(w, t.encoder[i], "encoder." + std::to_string(i), k.n_heads, k.d_model, k.ff_dim);
    }
    for (int64_t i = 0; i < k.dec_blocks; ++i) {
        declare_block(w, t.decoder[i], "decoder." + std::to_string(i), k.n_heads, k.d_model, k.ff_dim);
    }
}

void declare_predictor(Weights& w, const PredictorConfig& p, PredictorWeights& r) {
    const int64_t d = p.d_model, V1 = int64_t{1} << p.s1_bits, V2 = int64_t{1} << p.s2_bits;
    w.declare(r.emb_s1, "embedding.emb_s1.weight", {V1, d});
    w.declare(r.emb_s2, "embedding.emb_s2.weight", {V2, d});
    layers::declare_linear(w, r.fusion, "embedding.fusion_proj", d, 2 * d);
    w.declare(r.minute, "time_emb.minute_embed.weight", {60, d});
    w.declare(r.hour, "time_emb.hour_embed.weight", {24, d});
    w.declare(r.weekday, "time_emb.weekday_embed.weight", {7, d});
    w.declare(r.day, "time_emb.day_embed.weight", {32, d});
    w.declare(r.month, "time_emb.month_embed.weight", {13, d});
    r.blocks.resize(static_cast<size_t>(p.n_layers));
    for (int64_t i = 0; i < p.n_layers; ++i) declare_block(w, r.blocks[i], "transformer." + std::to_string(i), p.n_heads, d, p.ff_dim);
    w.declare(r.norm, "norm.weight", {d});
    layers::declare_linear(w, r.dep_q, "dep_layer.cross_attn.q_proj", d, d);
    layers::declare_linear(w, r.dep_k, "dep_layer.cross_attn.k_proj", d, d);
    layers::declare_linear(w, r.dep_v, "dep_layer.cross_attn.v_proj", d, d);
    layers::declare_linear(w, r.dep_o, "dep_layer.cross_attn.out_proj", d, d);
    w.declare(r.dep_inv_freq, "dep_layer.cross_attn.rotary.inv_freq", {d / p.dep_heads / 2}, kRotaryBuffer);
    w.declare(r.dep_norm, "dep_layer.norm.weight", {d});
    layers::declare_linear(w, r.proj_s1, "head.proj_s1", V1, d);
    layers::declare_linear(w, r.proj_s2, "head.proj_s2", V2, d);
    r.dep_heads = p.dep_heads;
}

}  // namespace

KronosWeights load_weights(const std::string& dir, const KronosConfig& c, const ModelOptions& options) {
    const WeightLoadOptions wo{options.device, options.dtype, options.mmap_weights, options.check_tensors};
    KronosWeights out;
    // Both lists are checked against their checkpoints (tokenizer first) before any tensor is loaded.
    auto tck = format::Checkpoint::open(dir + "/tokenizer");
    Weights tw(tck, wo);
    allow_extras(tw, *tck);
    declare_tokenizer(tw, c.tok, out.tok);
    tw.validate();
    auto pck = format::Checkpoint::open(dir);
    Weights pw(pck, wo);
    allow_extras(pw, *pck);
    declare_predictor(pw, c.pred, out.pred);
    pw.validate();
    tw.load_all();
    pw.load_all();

    const bool fused = options.device.is_cuda();  // fused GEMMs for the kernels path (kronos_forward.h's Path)
    for (Block& b : out.tok.encoder) finish_block(b, c.tok.d_model, fused, options.device);
    for (Block& b : out.tok.decoder) finish_block(b, c.tok.d_model, fused, options.device);
    for (Block& b : out.pred.blocks) finish_block(b, c.pred.d_model, fused, options.device);
    PredictorWeights& p = out.pred;
    if (!p.dep_inv_freq.defined()) p.dep_inv_freq = layers::rope_inv_freq(c.pred.d_model / p.dep_heads, kRopeTheta, options.device);
    if (fused) p.dep_kv = layers::fuse_rows({&p.dep_k, &p.dep_v});
    out.n_parameters = tw.expected_elements() + pw.expected_elements();
    return out;
}

}  // namespace cn::kronos
