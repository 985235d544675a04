// Maps the tensor names of a published LoRA adapter file onto the weights a model lets adapters patch, before any
// tensor data is read. LibTorch-free (readers stay fast to build and fuzzable); core/runtime/adapters reads the
// factors the plan names and fuses them.
//
// Module resolution is an exact table lookup (ComfyUI's approach, docs: ../shared/specs/zimage.md §5.9), never
// heuristic splitting: for every target module path P (the weight's name without ".weight") the table holds
//   - P itself ("layers.0.attention.to_q": diffusers/PEFT, ai-toolkit, DiffSynth, ...);
//   - P with every '.' replaced by '_' ("layers_0_attention_to_q": kohya / musubi / LyCORIS);
//   - Z-Image's original (Comfy single-file) names, dotted and underscored: "B.attention.out" -> "B.attention.to_out.0",
//     "x_embedder" -> "all_x_embedder.2-1", "final_layer.X" -> "all_final_layer.2-1.X", and "B.attention.qkv" -> the
//     rows of B's to_q, to_k and to_v in that order (a fused qkv LoRA: its down matrix is shared, its up matrix is
//     cut into row blocks of to_q's, to_k's and to_v's heights).
// A model that keeps the original names and a fused [3D, in] "B.attention.qkv" weight is served the other way round:
// diffusers' to_q / to_k / to_v keys land in its row thirds (LoraPatch::row_begin 0, D, 2D), to_out.0 in its out.
// A key is looked up as written, then with one of the prefixes "model.diffusion_model.", "diffusion_model.",
// "transformer.", "base_model.model.", "unet.", "lora_unet_", "lycoris_", "lora_transformer_" removed. The factor
// names accepted (down / up): lora_down.weight / lora_up.weight, lora_A.weight / lora_B.weight, lora.down.weight /
// lora.up.weight, lora_A.default.weight / lora_B.default.weight, bare lora_A / lora_B; plus "<module>.alpha".
//
// Scale of a module (the user's scale excluded): the product of
//   - kohya alpha: alpha / rank, rank = the down matrix's rows (musubi's ComfyUI qkv export stores 3 x alpha over a
//     rank of 3r, i.e. alpha / r) — no .alpha tensor: 1;
//   - the PEFT config in the safetensors metadata "lora_adapter_metadata" (a JSON object written by diffusers; its
//     "transformer."-prefixed fields when there are any, else its unprefixed ones): lora_alpha / r, or
//     lora_alpha / sqrt(r) with use_rslora, r and lora_alpha taken from rank_pattern / alpha_pattern where a pattern
//     matches the module as PEFT's get_pattern_key matches it (the first key K, in file order, for which
//     `(.*\.)?(K)$` matches the module path from its start; of Python's syntax, '^' '$' '.' ".*" "\." "\d" "\d+"
//     and literals are evaluated, other syntax is refused), PEFT's defaults (8, 8) for fields left out; that r must
//     equal the factors' rank — no such config (or none of r, lora_alpha, use_rslora and the patterns in it): 1.
// diffusers folds the kohya factor into the file-dtype factors (halving powers of two when alpha/rank < 0.5,
// lora_conversion_utils.py get_alpha_scales); the plan returns the exact fp64 value instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/format/safetensors.h"

namespace cn::format {

// A tensor of the adapter file as the planner sees it (name, dtype, shape), and, for the scalar "alpha" tensors,
// its value (the caller reads 1-element tensors: F32/F16/BF16/F64, and the integer dtypes diffusers' kohya export
// writes, -> double).
struct LoraTensorInfo {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    std::optional<double> scalar;
};

// A weight the model lets adapters patch: its state-dict name ("layers.0.attention.to_q.weight") and shape [out, in].
struct LoraTargetInfo {
    std::string name;
    int64_t out = 0, in = 0;
};

// One patch: delta rows [row_begin, row_begin + rows) of `target` += scale * up[up_row_begin : up_row_begin + rows, :] @ down.
struct LoraPatch {
    std::string target;               // a LoraTargetInfo::name
    int64_t row_begin = 0, rows = 0;  // rows of the target the patch covers (all of them for every family Z-Image has)
    std::string down, up;             // adapter tensor names: down [r, in], up [>= up_row_begin + rows, r]
    int64_t up_row_begin = 0;         // first row of `up` for this target (a fused qkv up matrix split into q, k, v: 0, D, 2D)
    int64_t rank = 0;                 // r (the down matrix's rows: 3r for a fused qkv export)
    double scale = 1;                 // see the top of this file; the user's scale excluded
    std::string source;               // the adapter's module key it came from ("lora_unet_layers_0_attention_qkv"), for messages
};

struct LoraPlan {
    std::vector<LoraPatch> patches;  // sorted by target name, then row_begin; no two overlap
    // Which family was recognised, for logs: "diffusers/peft", "ai-toolkit", "kohya", "kohya-comfy",
    // "kohya-comfy-fused-qkv", "kohya-dot", "lycoris", "diffsynth", "peft", "comfy", "original-names", or "mixed".
    std::string family;
};

// Bounds on the PEFT config's rank_pattern / alpha_pattern (each): entries, and bytes of one pattern. A full-size
// Z-Image config naming every module needs about 300 entries of under 64 bytes; the bounds cap the matching work.
inline constexpr size_t kMaxLoraPatternEntries = 512;
inline constexpr size_t kMaxLoraPatternBytes = 256;

// Plans `tensors` (an adapter file's, with its safetensors __metadata__ `metadata`) against the model's `targets`.
// Every tensor is accounted for or the call fails. Throws cn::Error whose message is "<label>: <key>: <what>":
//   - kInvalidArgument for an adapter that does not fit this model: a key that maps to no target, a tensor that is
//     not a LoRA factor or alpha, a down or up matrix without its other half, an alpha without factors, a shape that
//     does not fit the target (a fused qkv up matrix must have the rows of to_q + to_k + to_v), rank 0, a non-finite
//     or missing alpha value, a metadata rank that differs from the factors', two keys patching the same rows (for
//     instance split to_q/to_k/to_v keys next to a fused qkv key of the same block: diffusers keeps the split ones and
//     drops the fused one, ComfyUI adds both; cutenative refuses to guess), a file that patches nothing;
//   - kUnsupported for DoRA (dora_scale, lora_magnitude_vector, use_dora), LoKr (lokr_*), LoHa (hada_*), OFT/BOFT,
//     full-difference patches (.diff, .diff_b), lora_mid factors, LoRA biases (lora_B.bias), text-encoder keys
//     (lora_te*, text_encoder*), factor dtypes other than F16/BF16/F32/F64 and metadata patterns using regex syntax
//     beyond the subset above: the message says what the file is and that cutenative refuses it rather than drop part
//     of it;
//   - kModelFormat for malformed lora_adapter_metadata (JSON, field types, the pattern bounds above).
// Duplicate target names, or a target with a non-positive dimension, are the caller's bug: kInternal.
LoraPlan plan_lora(const std::vector<LoraTensorInfo>& tensors, const std::map<std::string, std::string>& metadata,
                   const std::vector<LoraTargetInfo>& targets, std::string_view label);

}  // namespace cn::format
