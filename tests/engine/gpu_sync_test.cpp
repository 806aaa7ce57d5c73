// SPDX-License-Identifier: MIT
// Host synchronisations of a pass on a CUDA device, counted with torch's CUDA sync debug
// mode (what torch.cuda.set_sync_debug_mode("warn") turns on): every synchronising copy
// (device to host, pageable host to device, .item()) and stream or device synchronisation
// torch makes raises a warning, which a handler counts. The README promises no host reads
// in the middle of a GPU pass: one read-back per pass (scores, statistics slots and the
// input-mutation flag together). Compiled in every CUDA build; runs where a GPU is present
// (tools/gpu-check.sh), skips elsewhere.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Backtrace.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <cstdio>

#include "inspect/observer.h"
#include "run/pass.h"

using namespace ampscope;

namespace {

/// Counts the synchronisations torch reports while alive; keeps where the first few happened.
class SyncCounter : public c10::WarningHandler {
public:
    SyncCounter() : prev_(c10::WarningUtils::get_warning_handler()) {
        c10::WarningUtils::set_warning_handler(this);
        c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
    }
    ~SyncCounter() override {
        c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
        c10::WarningUtils::set_warning_handler(prev_);
    }
    SyncCounter(const SyncCounter&) = delete;
    SyncCounter& operator=(const SyncCounter&) = delete;
    void process(const c10::Warning& w) override {
        if (w.msg().find("synchroniz") == std::string::npos) return prev_->process(w);
        if (count_++ < 3) where_ += "--- synchronisation " + std::to_string(count_) + ":\n" + c10::get_backtrace(1, 14);
    }
    int count() const { return count_; }
    const std::string& where() const { return where_; }

private:
    c10::WarningHandler* prev_;
    int count_ = 0;
    std::string where_;
};

}  // namespace

TEST(GpuSync, CounterSeesASynchronisingCopy) {
    // The counter itself: a device-to-host copy and .item() are seen, device work is not.
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    auto x = at::randn({1024}, at::TensorOptions().device(at::kCUDA));
    torch::cuda::synchronize();
    SyncCounter sc;
    auto y = (x * 2).sum();
    EXPECT_EQ(sc.count(), 0) << sc.where();
    (void)y.item<float>();
    (void)x.cpu();
    EXPECT_EQ(sc.count(), 2);
}

TEST(GpuSync, OneHostReadPerInstrumentedPass) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    using namespace ampscope::detail;
    auto model = load_model("demo:transformer", 0);
    auto probes = load_probes("demo", *model, 0);
    const at::Device dev(at::kCUDA);
    model->to_device(dev);
    PassOptions o;
    o.batch_size = 8;  // 40 samples: five batches, so a per-batch read would show five times
    o.inspect = true;
    run_pass(*model, probes, dev, o, nullptr, true);  // warm-up: library handles, allocator
    torch::cuda::synchronize();
    struct Case {
        const char* name;
        Precision precision;
        bool inspect, mutation_check;
    };
    for (const Case c :
         {Case{"fp32 reference, mutation check", Precision::Fp32, true, true},
          Case{"fp16, inspected", Precision::Fp16, true, false}, Case{"bf16, inspected", Precision::Bf16, true, false},
          Case{"fp16, not inspected", Precision::Fp16, false, false}}) {
        SCOPED_TRACE(c.name);
        o.precision = c.precision;
        o.inspect = c.inspect;
        bool mutated = true;
        o.inputs_mutated = c.mutation_check ? &mutated : nullptr;
        PassResult r;
        int syncs = 0;
        {
            SyncCounter sc;
            r = run_pass(*model, probes, dev, o, nullptr, false);
            syncs = sc.count();
            EXPECT_EQ(syncs, 1) << "host synchronisations in one pass; the first ones:\n" << sc.where();
        }
        std::printf("[ sync    ] %s: %d host synchronisation(s) in a pass of %d batches\n", c.name, syncs,
                    int((probes.inputs[0].size(0) + o.batch_size - 1) / o.batch_size));
        if (c.mutation_check) {
            EXPECT_FALSE(mutated);  // read with the scores, and false
        }
        if (c.inspect) {
            EXPECT_FALSE(r.layers.empty());
        }
        // The statistics read back with the scores still tell the demo's story.
        if (c.inspect && c.precision == Precision::Fp16) {
            EXPECT_EQ(r.nonfinite_samples.size(), 8u);
            ASSERT_TRUE(r.origin.has_value());
            EXPECT_EQ(r.origin->module, "embed");
            EXPECT_EQ(r.origin->samples.size(), 8u);
        }
    }
    o.inputs_mutated = nullptr;
}
