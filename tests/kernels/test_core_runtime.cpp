// Runtime pieces below the C ABI: mode switching refuses with BUSY while a call is in flight; run
// contexts cancel and time out; the non-finite counter's CPU path; the declare-once weight list.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>

#include "core/common/status.h"
#include "core/format/checkpoint.h"
#include "core/models/registry.h"
#include "core/runtime/model.h"
#include "core/runtime/run_context.h"
#include "core/runtime/weights.h"
#include "kernels/nonfinite.h"
#include "tests/support/fixtures.h"

namespace {

cn::Status status_of(const std::function<void()>& f) {
    try {
        f();
        return cn::Status::kOk;
    } catch (const cn::Error& e) {
        return e.status();
    }
}

}  // namespace

TEST(ModeSwitch, BusyWhileACallIsInFlight) {
    cn::test::TempDir d;
    cn::test::write_chronos2_checkpoint(d.path());
    auto model = cn::load_model(d.path(), cn::ModelOptions{});
    {
        cn::Model::CallScope call(*model);
        EXPECT_EQ(status_of([&] { model->set_mode(CN_MODE_EAGER); }), cn::Status::kBusy);
        EXPECT_EQ(status_of([&] { model->set_mode(CN_MODE_GRAPH); }), cn::Status::kBusy);
        cn::Model::CallScope second(*model);  // concurrent calls are fine
        EXPECT_EQ(status_of([&] { model->set_mode(CN_MODE_EAGER); }), cn::Status::kBusy);
    }
    EXPECT_EQ(status_of([&] { model->set_mode(CN_MODE_EAGER); }), cn::Status::kOk);
    EXPECT_EQ(status_of([&] { model->set_mode(CN_MODE_GRAPH); }), cn::Status::kUnsupported);
    EXPECT_EQ(model->mode(), CN_MODE_EAGER);
}

TEST(RunContext, CancelAndDeadline) {
    cn::RunContext run;
    run.begin();
    EXPECT_EQ(status_of([&] { run.check(); }), cn::Status::kOk);
    run.cancel();
    EXPECT_EQ(status_of([&] { run.check(); }), cn::Status::kCancelled);
    run.reset();
    EXPECT_EQ(status_of([&] { run.check(); }), cn::Status::kOk);
    run.timeout_ms = 1;
    run.begin();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(status_of([&] { run.check(); }), cn::Status::kDeadlineExceeded);
    run.set_total(10);
    run.advance(3);
    EXPECT_EQ(run.done(), 3u);
    EXPECT_EQ(run.total(), 10u);
}

TEST(NonFinite, CpuPathCounts) {
    auto t = at::ones({3, 5}, at::kFloat);
    EXPECT_EQ(cn::kernels::count_nonfinite_cpu(t), 0);
    t[0][1] = std::numeric_limits<float>::quiet_NaN();
    t[2][4] = std::numeric_limits<float>::infinity();
    t[1][0] = -std::numeric_limits<float>::infinity();
    EXPECT_EQ(cn::kernels::count_nonfinite_cpu(t), 3);
    EXPECT_EQ(cn::kernels::count_nonfinite_cpu(t.to(at::kBFloat16)), 3);
    EXPECT_EQ(cn::kernels::count_nonfinite_cpu(t.to(at::kHalf)), 3);
    EXPECT_EQ(cn::kernels::count_nonfinite_cpu(t.t()), 3) << "non-contiguous";
    // 1e5 overflows f16 to Inf: counted after conversion.
    EXPECT_EQ(cn::kernels::count_nonfinite_cpu(at::full({4}, 1e5, at::kFloat).to(at::kHalf)), 4);
    EXPECT_EQ(cn::kernels::count_nonfinite_cpu(at::ones({4}, at::kLong)), 0);
    EXPECT_EQ(cn::kernels::count_nonfinite(t), 3);
}

// The declare-once weight list: validation before any load (missing, mis-shaped, undeclared), optional tensors
// and buffers, a dtype override, one load_all.
TEST(Weights, DeclaredListIsValidatedThenLoadedOnce) {
    cn::test::TempDir d;
    cn::test::write_file(d.file("model.safetensors"),
                         cn::test::safetensors_f32({{"a.weight", {2, 3}}, {"a.bias", {2}}, {"rotary.inv_freq", {4}}}));
    auto open = [&] {
        return cn::Weights(cn::format::Checkpoint::open(d.path()), cn::WeightLoadOptions{c10::Device(c10::kCPU), c10::kBFloat16});
    };
    at::Tensor w, b, inv, absent;
    {
        cn::Weights ws = open();
        ws.declare(w, "a.weight", {2, 3});
        ws.declare(b, "a.bias", {2});
        ws.declare(inv, "rotary.inv_freq", {4}, cn::WeightFlags{/*optional=*/true, /*buffer=*/true, c10::kFloat});
        ws.declare(absent, "not.there", {7}, cn::WeightFlags{/*optional=*/true});
        ws.validate();
        EXPECT_EQ(ws.expected_elements(), 8u);  // no buffer, no absent optional tensor
        ws.load_all();
        EXPECT_EQ(status_of([&] { ws.load_all(); }), cn::Status::kInternal);
    }
    ASSERT_TRUE(w.defined() && b.defined() && inv.defined());
    EXPECT_FALSE(absent.defined());
    EXPECT_EQ(w.scalar_type(), c10::kBFloat16);
    EXPECT_EQ(inv.scalar_type(), c10::kFloat);
    EXPECT_EQ(w.sizes(), (std::vector<int64_t>{2, 3}));
    {  // missing, mis-shaped (optional too) and undeclared tensors are MODEL_FORMAT before anything loads
        cn::Weights ws = open();
        at::Tensor x;
        ws.declare(x, "a.weight", {2, 3});
        ws.declare(x, "a.bias", {2});
        EXPECT_EQ(status_of([&] { ws.validate(); }), cn::Status::kModelFormat);  // rotary.inv_freq undeclared
        ws.allow_unused("rotary.inv_freq");
        ws.validate();
        ws.declare(x, "gone", {1});
        EXPECT_EQ(status_of([&] { ws.validate(); }), cn::Status::kModelFormat);
    }
    {
        cn::Weights ws = open();
        at::Tensor x;
        ws.declare(x, "a.weight", {3, 2});
        ws.declare(x, "a.bias", {2});
        ws.declare(x, "rotary.inv_freq", {5}, cn::WeightFlags{/*optional=*/true, /*buffer=*/true});
        EXPECT_EQ(status_of([&] { ws.validate(); }), cn::Status::kModelFormat);
        EXPECT_EQ(status_of([&] { ws.declare(x, "a.bias", {2}); }), cn::Status::kInternal);  // declared twice
    }
}
