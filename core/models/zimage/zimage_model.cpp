#include "core/models/zimage/zimage_model.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <tuple>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/round.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/format/model_config.h"
#include "core/models/zimage/qwen3_encoder.h"
#include "core/models/zimage/zimage_config.h"
#include "core/models/zimage/zimage_dit.h"
#include "core/models/zimage/zimage_graphs.h"
#include "core/models/zimage/zimage_pipeline.h"
#include "core/models/zimage/zimage_vae.h"
#include "core/runtime/adapters.h"
#include "core/runtime/weights.h"
#include "core/tokenizers/bpe.h"

namespace cn::zimage {
namespace {

// One component's weights: its checkpoint (stem as diffusers/transformers save it) and declared list.
struct Component {
    std::string name;
    std::shared_ptr<const format::Checkpoint> checkpoint;
    std::unique_ptr<Weights> weights;
};

Component open_component(const std::string& dir, const std::string& name, const std::string& stem, const ModelOptions& o) {
    Component c;
    c.name = name;
    c.checkpoint = format::Checkpoint::open(dir + "/" + name, stem);
    c.weights = std::make_unique<Weights>(c.checkpoint, WeightLoadOptions{o.device, o.dtype, o.mmap_weights, o.check_tensors});
    return c;
}

class ZImageModel final : public Model {
public:
    ZImageModel(ModelOptions options, nlohmann::json config, ZImageConfig cfg, text::Qwen2Tokenizer tok, std::unique_ptr<Qwen3Encoder> te,
                std::unique_ptr<ZImageDit> dit, std::unique_ptr<VaeDecoder> vae, uint64_t n_parameters, uint64_t device_parameters,
                WeightIndex dit_weights)
        : Model(options, std::move(config)),
          cfg_(std::move(cfg)),
          tok_(std::move(tok)),
          te_(std::move(te)),
          dit_(std::move(dit)),
          vae_(std::move(vae)),
          adapters_(std::make_unique<AdapterHost>(std::move(dit_weights))) {
        n_parameters_ = n_parameters;
        weight_bytes_ = device_parameters * c10::elementSize(options.dtype);  // an offloaded text encoder's are host bytes
    }

    cn_model_kind kind() const override { return CN_MODEL_KIND_ZIMAGE; }

    void fill_info(cn_model_info& info) const override {
        Model::fill_info(info);
        info.max_tokens = kMaxTextTokens;
        info.image_size_multiple = cfg_.size_multiple();
        info.default_steps = kDefaultSteps;
        info.default_guidance = kDefaultGuidance;
    }

    nlohmann::json describe() const override {
        nlohmann::json j = Model::describe();
        j["max_tokens"] = kMaxTextTokens;
        j["image_size_multiple"] = cfg_.size_multiple();
        j["default_steps"] = kDefaultSteps;
        j["default_guidance"] = kDefaultGuidance;
        return j;
    }

    size_t generate_bytes(const GenerateRequest& req) const override {
        check(req);
        return static_cast<size_t>(req.width) * static_cast<size_t>(req.height) * 3 * static_cast<size_t>(req.count);
    }

    void generate(const GenerateRequest& req, RunContext& run, uint8_t* out, size_t out_bytes) override {
        generate_impl(req, run, out, out_bytes, nullptr);
    }

    // Adapters patch the transformer (diffusers loads LoRA into the transformer only).
    AdapterHost* adapter_host() override { return adapters_.get(); }

protected:
    // Eager: diffusers' ops. Graph (CUDA): each DiT forward a replay of the eager path captured per shape (its
    // images are eager's, bit for bit). Fused: the DiT's fused path (every device), replayed from graphs on CUDA.
    void apply_mode(cn_mode mode) override {
        if (mode == CN_MODE_GRAPH && !options_.device.is_cuda()) Model::apply_mode(mode);  // UNSUPPORTED
        if (mode != CN_MODE_FUSED && mode != CN_MODE_GRAPH) Model::apply_mode(mode);
        graphs_ =
            mode == CN_MODE_GRAPH || (mode == CN_MODE_FUSED && options_.device.is_cuda()) ? ZImageGraphs::create(options_.device) : nullptr;
    }

    MemoryUse memory_use() const override {
        MemoryUse m{weight_bytes_, 0, 0};
        if (graphs_) m.graph_pool_bytes = graphs_->pool_bytes();
        return m;
    }

public:
    ZImageParts parts() const { return {&cfg_, te_.get(), dit_.get(), vae_.get()}; }

    void generate_impl(const GenerateRequest& req, RunContext& run, uint8_t* out, size_t out_bytes, ZImageTrace* trace) {
        const size_t bytes = generate_bytes(req);
        if (out_bytes < bytes) {
            fail(Status::kInvalidArgument,
                 "out_bytes: " + std::to_string(out_bytes) + " is smaller than the image's " + std::to_string(bytes));
        }
        const int32_t steps = req.steps == CN_GENERATE_DEFAULT_STEPS ? kDefaultSteps : req.steps;
        const float guidance = req.guidance < 0.0f ? kDefaultGuidance : req.guidance;
        const bool cfg = guidance > 0.0f;
        // Tokenize first: a bad prompt fails the call before any work.
        const std::vector<int32_t> pos_ids = tokens(req.prompt, "prompt");
        std::vector<int32_t> neg_ids;
        if (cfg) neg_ids = tokens(req.negative_prompt.value_or(""), "negative_prompt");
        run.set_total(static_cast<uint64_t>(steps));
        run.check();
        run.mark(RunContext::kPrepare);
        // The transformer's weights hold the request's adapters (none: the weights as loaded) until the call ends.
        std::vector<AdapterUse> set = req.adapters;
        if (!req.lora_path.empty()) {
            set.push_back(
                {Adapter::load(req.lora_path, AdapterLoadOptions{}, adapters_->targets(), options_.device, this), req.lora_scale});
        }
        const AdapterHost::Lease lease = adapters_->hold(set, run);
        end_phase(run, RunContext::kAdapters);

        // Text: hidden_states[-2] of the valid tokens; positive first, negative second (the pipeline's batch order).
        const auto dev = options_.device;
        std::vector<at::Tensor> caps{encode(pos_ids)};
        if (cfg) caps.push_back(encode(neg_ids));
        if (trace) {
            trace->pos_ids = pos_ids;
            trace->neg_ids = neg_ids;
            trace->pos_embeds = caps[0].to(at::kCPU, at::kFloat);
            if (cfg) trace->neg_embeds = caps[1].to(at::kCPU, at::kFloat);
        }
        end_phase(run, RunContext::kText);
        // Initial noise: fp32 randn from the model device's generator, seeded as torch.Generator.manual_seed; image i
        // of the call from seed + i, as a one-image call with that seed.
        const int64_t s = cfg_.vae.scale_factor();
        const int64_t h = 2 * (req.height / (s * 2)), w = 2 * (req.width / (s * 2));
        std::vector<at::Tensor> noise;
        for (int32_t i = 0; i < req.count; ++i) {
            at::Generator gen = at::globalContext().defaultGenerator(dev).clone();
            {
                std::lock_guard<std::mutex> lock(gen.mutex());
                gen.set_current_seed(run.seed + static_cast<uint64_t>(i));
            }
            noise.push_back(at::randn({1, cfg_.dit.in_channels, h, w}, gen, at::TensorOptions().dtype(at::kFloat).device(dev)));
        }
        at::Tensor latents = noise.size() == 1 ? noise[0] : at::cat(noise, 0);

        // Graph replays share static buffers: a call in a graph-replaying mode holds their lock throughout.
        std::optional<GraphPool::Lock> graph_lock;
        if (graphs_) graph_lock.emplace(graphs_->lock());
        const DitRunner runner{*dit_, mode() == CN_MODE_FUSED, graphs_.get(), graph_lock ? &*graph_lock : nullptr};
        DenoiseParams params;
        params.steps = steps;
        params.guidance = guidance;
        params.cfg_truncation = req.cfg_truncation;
        params.cfg_normalization = req.cfg_normalization;
        latents = denoise(runner, cfg_.scheduler, params, latents, caps, options_.dtype, run, trace);
        const auto dtype = options_.dtype;
        end_phase(run, RunContext::kDenoise);

        // Decode: the pipeline casts to the VAE's dtype and un-scales in it; postprocess denormalises in it too.
        at::Tensor z = latents.to(dtype);
        z = z / cfg_.vae.scaling_factor + cfg_.vae.shift_factor;
        at::Tensor img = vae_->decode(z);
        if (trace) trace->decoded = img[0].to(at::kCPU, at::kFloat);
        img = at::clamp(img * 0.5 + 0.5, 0, 1);
        // numpy: (x * 255).round() in fp32 (half to even), then uint8: elementwise and exact on any device, so done
        // where the image is; only the bytes travel to the host.
        const at::Tensor rgb =
            at::round(img.permute({0, 2, 3, 1}).to(at::kFloat) * 255).to(at::kByte).contiguous().to(at::kCPU);  // [n, H, W, 3]
        std::memcpy(out, rgb.const_data_ptr<uint8_t>(), bytes);
        run.mark(RunContext::kDecode);
    }

private:
    // Ends a phase with its device work: a GPU model waits for its stream first (three waits per image).
    void end_phase(RunContext& run, RunContext::Phase p) const {
        const c10::Device dev = options_.device;
        if (!dev.is_cpu()) c10::impl::VirtualGuardImpl(dev.type()).getStream(dev).synchronize();
        run.mark(p);
    }

    void check(const GenerateRequest& req) const {
        const int64_t m = cfg_.size_multiple();
        for (auto [v, name] : {std::pair{req.width, "width"}, std::pair{req.height, "height"}}) {
            if (v <= 0 || v % m != 0) {
                fail(Status::kInvalidArgument, std::string(name) + ": " + std::to_string(v) + " is not a positive multiple of " +
                                                   std::to_string(m) + " (this model's size multiple)");
            }
        }
        // RoPE position range (config axes_lens): an image is (height / m) x (width / m) patch positions on axes 1 and 2.
        const auto& lens = cfg_.dit.axes_lens;
        for (auto [v, axis, name] : {std::tuple{req.height, 1, "height"}, std::tuple{req.width, 2, "width"}}) {
            if (v / m > lens[static_cast<size_t>(axis)]) {
                fail(Status::kInvalidArgument, std::string(name) + ": " + std::to_string(v) + " px is " + std::to_string(v / m) +
                                                   " patch positions, beyond this model's position range of " +
                                                   std::to_string(lens[static_cast<size_t>(axis)]) + " (axes_lens[" + std::to_string(axis) +
                                                   "]: at most " + std::to_string(lens[static_cast<size_t>(axis)] * m) + " px)");
            }
        }
        if (req.steps != CN_GENERATE_DEFAULT_STEPS && (req.steps < 1 || req.steps > 1000)) {
            fail(Status::kInvalidArgument, "steps: must be in [1, 1000] or CN_GENERATE_DEFAULT_STEPS");
        }
        if (!std::isfinite(req.guidance)) fail(Status::kInvalidArgument, "guidance: must be finite");
        if (req.count < 1 || req.count > CN_GENERATE_MAX_COUNT) {
            fail(Status::kInvalidArgument, "count: must be in [1, " + std::to_string(CN_GENERATE_MAX_COUNT) + "]");
        }
        for (size_t i = 0; i < req.adapters.size(); ++i) {
            if (!req.adapters[i].adapter || req.adapters[i].adapter->owner() != this) {
                fail(Status::kInvalidArgument,
                     "adapters[" + std::to_string(i) + "]: loaded for another model (cn_adapter_load with this one)");
            }
        }
    }

    // The text encoder's output for these tokens on the model's device, from a small cache of recent prompts (a
    // repeated prompt, a seed sweep or CFG's empty negative prompt is not encoded again; the same values).
    at::Tensor encode(const std::vector<int32_t>& ids) {
        {
            std::lock_guard<std::mutex> lock(prompt_mu_);
            for (auto it = prompts_.begin(); it != prompts_.end(); ++it) {
                if (it->first == ids) {
                    prompts_.splice(prompts_.begin(), prompts_, it);
                    return it->second;
                }
            }
        }
        at::Tensor e = te_->encode(ids).to(options_.device);
        // Complete before another call (on another stream) can find it.
        const c10::Device dev = options_.device;
        if (!dev.is_cpu()) c10::impl::VirtualGuardImpl(dev.type()).getStream(dev).synchronize();
        std::lock_guard<std::mutex> lock(prompt_mu_);
        prompts_.emplace_front(ids, e);
        if (prompts_.size() > kPromptCache) prompts_.pop_back();
        return e;
    }

    // The templated prompt's token ids, truncated to the pipeline's 512.
    std::vector<int32_t> tokens(const std::string& prompt, const char* field) const {
        std::vector<int32_t> ids;
        try {
            ids = tok_.encode(text::zimage_chat_prompt(prompt));
        } catch (const Error& e) {
            fail(e.status(), std::string(field) + ": " + e.what());
        }
        if (static_cast<int64_t>(ids.size()) > kMaxTextTokens) ids.resize(static_cast<size_t>(kMaxTextTokens));
        // Caption rows take positions 1 .. padded length on axis 0 and the image the next one: all within axes_lens[0].
        const int64_t padded = (static_cast<int64_t>(ids.size()) + 31) / 32 * 32;
        if (padded + 1 >= cfg_.dit.axes_lens[0]) {
            fail(Status::kInvalidArgument, std::string(field) + ": " + std::to_string(ids.size()) + " tokens (" + std::to_string(padded) +
                                               " positions once padded) are beyond this model's caption position range (axes_lens[0] = " +
                                               std::to_string(cfg_.dit.axes_lens[0]) + "); shorten it");
        }
        return ids;
    }

    ZImageConfig cfg_;
    text::Qwen2Tokenizer tok_;
    std::unique_ptr<Qwen3Encoder> te_;
    std::unique_ptr<ZImageDit> dit_;
    std::unique_ptr<VaeDecoder> vae_;
    std::unique_ptr<AdapterHost> adapters_;
    static constexpr size_t kPromptCache = 8;  // prompts' embeddings kept (<= 2.6 MB each in bf16 at full size)
    std::mutex prompt_mu_;
    std::list<std::pair<std::vector<int32_t>, at::Tensor>> prompts_;  // most recently used first
    std::unique_ptr<ZImageGraphs> graphs_;  // graph and (CUDA) fused modes; set and dropped by apply_mode (no call in flight)
};

}  // namespace

void generate_traced(Model& model, const GenerateRequest& req, RunContext& run, uint8_t* out, size_t out_bytes, ZImageTrace* trace) {
    auto* z = dynamic_cast<ZImageModel*>(&model);
    if (!z) fail(Status::kInvalidArgument, "generate_traced: not a Z-Image model");
    z->generate_impl(req, run, out, out_bytes, trace);
}

ZImageParts zimage_parts(const Model& model) {
    const auto* z = dynamic_cast<const ZImageModel*>(&model);
    if (!z) fail(Status::kInvalidArgument, "zimage_parts: not a Z-Image model");
    return z->parts();
}

namespace {

// A pipeline directory read, its weight lists declared and validated: everything but the loading.
struct Prepared {
    ZImageConfig cfg;
    std::optional<text::Qwen2Tokenizer> tok;
    Component te, tr, va;
    std::unique_ptr<Qwen3Encoder> encoder;
    std::unique_ptr<ZImageDit> dit;
    std::unique_ptr<VaeDecoder> vae;
};

Prepared prepare(const std::string& dir, const ModelOptions& options) {
    Prepared p;
    p.cfg = parse_zimage_config(dir);
    p.tok.emplace(text::Qwen2Tokenizer::from_directory(dir + "/tokenizer"));
    if (static_cast<int64_t>(p.tok->vocab_size()) > p.cfg.text.vocab_size) {
        fail(Status::kModelFormat, dir + "/tokenizer/tokenizer.json: " + std::to_string(p.tok->vocab_size()) +
                                       " tokens, more than text_encoder vocab_size " + std::to_string(p.cfg.text.vocab_size));
    }
    // Every component's weight list is validated before any is loaded (nothing is allocated for a bad directory).
    ModelOptions te_options = options;
    if (options.offload_text_encoder) te_options.device = c10::Device(c10::kCPU);
    p.te = open_component(dir, "text_encoder", "model", te_options);
    p.tr = open_component(dir, "transformer", "diffusion_pytorch_model", options);
    p.va = open_component(dir, "vae", "diffusion_pytorch_model", options);
    const std::string te_prefix = p.te.checkpoint->find("model.embed_tokens.weight") ? "model." : "";
    p.encoder = std::make_unique<Qwen3Encoder>(p.cfg.text, *p.te.weights, te_prefix);
    p.dit = std::make_unique<ZImageDit>(p.cfg.dit, *p.tr.weights);
    p.vae = std::make_unique<VaeDecoder>(p.cfg.vae, *p.va.weights);
    for (Component* c : {&p.te, &p.tr, &p.va}) {
        try {
            c->weights->validate();
        } catch (const Error& e) {
            fail(e.status(), c->name + ": " + e.what());
        }
    }
    return p;
}

}  // namespace

void check_zimage_directory(const std::string& dir) { (void)prepare(dir, ModelOptions{}); }

std::unique_ptr<Model> load_zimage(const std::string& dir, const ModelOptions& options) {
    Prepared p = prepare(dir, options);
    uint64_t n = 0, on_device = 0;
    for (Component* c : {&p.te, &p.tr, &p.va}) {
        c->weights->load_all();
        n += c->weights->expected_elements();
        if (!(c == &p.te && options.offload_text_encoder)) on_device += c->weights->expected_elements();
    }
    p.encoder->finish(options.offload_text_encoder ? c10::Device(c10::kCPU) : options.device);
    // Experimental switches, off by default (measured in docs/benchmarks.md before any becomes a default).
    if (const char* a = std::getenv("CN_ZIMAGE_ATTENTION"); a && std::string(a) == "cudnn") p.dit->use_cudnn_attention(true);
    if (const char* l = std::getenv("CN_ZIMAGE_VAE_LAYOUT"); l && std::string(l) == "nhwc") p.vae->use_channels_last();
    WeightIndex dit_index = p.tr.weights->take_index();
    p.dit->finish(options.device, dit_index);
    // describe()'s "config": each component's config as read.
    nlohmann::json config;
    for (const char* f : {"transformer", "text_encoder", "vae"}) config[f] = format::ModelConfig::load(dir + "/" + f, "config.json").json();
    config["scheduler"] = format::ModelConfig::load(dir + "/scheduler", "scheduler_config.json").json();
    return std::make_unique<ZImageModel>(options, std::move(config), p.cfg, std::move(*p.tok), std::move(p.encoder), std::move(p.dit),
                                         std::move(p.vae), n, on_device, std::move(dit_index));
}

}  // namespace cn::zimage
