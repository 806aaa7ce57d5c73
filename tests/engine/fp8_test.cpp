// SPDX-License-Identifier: MIT
// The FP8 and block-scaled quantizers (precision/fp8.h) against torchao 0.18 in Python on the same
// tensors (tests/engine/fp8_oracle.py, computed at each run): dequantized values bitwise (NaN where
// torchao has NaN), the scales chosen, the counts of underflow, subnormal, saturated values; and
// DelayedScaling against Transformer Engine's rule written in the oracle. Planted cases: values
// above E4M3's max under a stale scale, gradients that underflow E5M2, an MX block whose one
// outlier flushes its 31 neighbours to zero, zeros, NaN/Inf, lengths that are not a multiple of
// the block (padded with zeros, as fp8.h says).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/serialize.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <fstream>
#include <limits>
#include <set>
#include <unistd.h>

#include "ampscope/engine/fp8.h"
#include "ampscope/engine/vocabulary.h"
#include "precision/fp8.h"

using namespace ampscope;
using nlohmann::json;

namespace {

struct Case {
    std::string name;
    at::Tensor x;
    QuantSpec spec;
};

struct DelayedRun {
    std::string name;
    Fp8Element element;
    int history_len, margin;
    AmaxAlgo algo;
    std::vector<float> amaxes;
};

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

QuantSpec spec(Fp8Scheme s, Fp8Element e = Fp8Element::E4M3, int64_t axis = -1, float given = 0.0f) {
    QuantSpec q;
    q.scheme = s;
    q.element = e;
    q.axis = axis;
    q.given_scale = given;
    return q;
}

std::vector<Case> tensorwise_cases(at::Generator& g) {
    std::vector<Case> c;
    c.push_back({"tensorwise e4m3 randn", at::randn({64, 96}, g) * 3, spec(Fp8Scheme::Tensorwise)});
    c.push_back({"tensorwise e4m3 bf16", at::randn({64, 96}, g).to(at::kBFloat16), spec(Fp8Scheme::Tensorwise)});
    // gradients spanning 1e-12 .. 1e2: the small ones underflow E5M2 (or land in its subnormals)
    auto grads = at::sign(at::randn({32, 64}, g)) * at::pow(10.0, at::rand({32, 64}, g) * 14 - 12);
    c.push_back({"tensorwise e5m2 gradient underflow", grads, spec(Fp8Scheme::Tensorwise, Fp8Element::E5M2)});
    // a stale (delayed) scale of 1: values above 448 saturate; 464 is the tie that stays 448
    auto sat = at::randn({16, 64}, g);
    sat[0][0] = 1000.0;
    sat[1][1] = -3000.0;
    sat[2][2] = 465.0;
    sat[3][3] = 464.0;
    sat[4][4] = 2.5e38f;  // x * scale stays finite
    c.push_back(
        {"tensorwise e4m3 given scale saturates", sat, spec(Fp8Scheme::Tensorwise, Fp8Element::E4M3, -1, 1.0f)});
    auto sat5 = at::randn({8, 32}, g) * 1e4;
    sat5[0][0] = 61440.0;  // the E5M2 tie that rounds out of range
    sat5[0][1] = 61439.0;
    c.push_back(
        {"tensorwise e5m2 given scale saturates", sat5, spec(Fp8Scheme::Tensorwise, Fp8Element::E5M2, -1, 1.0f)});
    c.push_back({"tensorwise zeros", at::zeros({8, 32}), spec(Fp8Scheme::Tensorwise)});
    auto bad = at::randn({8, 32}, g);
    bad[0][0] = kNan;
    bad[1][1] = kInf;
    c.push_back({"tensorwise nan inf", bad, spec(Fp8Scheme::Tensorwise)});
    auto inf_only = at::randn({4, 16}, g);
    inf_only[2][3] = -kInf;
    c.push_back({"tensorwise inf", inf_only, spec(Fp8Scheme::Tensorwise)});
    return c;
}

std::vector<Case> rowwise_cases(at::Generator& g) {
    std::vector<Case> c;
    auto rows = at::randn({32, 80}, g) * at::pow(10.0, at::rand({32, 1}, g) * 6 - 3);
    c.push_back({"rowwise activation (scale per row)", rows, spec(Fp8Scheme::Rowwise, Fp8Element::E4M3, -1)});
    c.push_back({"rowwise weight^T (scale per column)", rows, spec(Fp8Scheme::Rowwise, Fp8Element::E4M3, 0)});
    auto three = at::randn({2, 6, 40}, g).to(at::kBFloat16);
    three[1][2][5] = 0.0;
    c.push_back({"rowwise 3-d bf16", three, spec(Fp8Scheme::Rowwise, Fp8Element::E4M3, -1)});
    return c;
}

std::vector<Case> mx_cases(at::Generator& g) {
    std::vector<Case> c;
    auto x = at::randn({8, 128}, g);
    x[0].narrow(0, 0, 32).copy_(at::rand({32}, g) * 0.01 + 0.005);
    x[0][5] = 1e4;                                        // the outlier: its 31 neighbours flush to zero
    x[1][40] = 490.0;                                     // amax/2^floor(log2 amax - 8) = 490 > 464: saturates
    x[2].narrow(0, 64, 32).copy_(at::full({32}, 1e-39));  // an FP32-subnormal block
    x[3][100] = kNan;
    x[4][3] = kInf;
    x[5].narrow(0, 32, 32).zero_();
    c.push_back({"mx e4m3 planted blocks", x, spec(Fp8Scheme::Mx)});
    c.push_back({"mx e4m3 planted blocks bf16", x.to(at::kBFloat16), spec(Fp8Scheme::Mx)});
    c.push_back({"mx e4m3 length 70 (padded)", at::randn({5, 70}, g), spec(Fp8Scheme::Mx)});
    c.push_back({"mx e4m3 along dim 0, length 40", at::randn({40, 24}, g), spec(Fp8Scheme::Mx, Fp8Element::E4M3, 0)});
    c.push_back({"mx e5m2", at::randn({8, 64}, g) * 100, spec(Fp8Scheme::Mx, Fp8Element::E5M2)});
    c.push_back({"mx e4m3 3-d", at::randn({3, 4, 64}, g), spec(Fp8Scheme::Mx)});
    // RCEIL scales (torchao's MXFP8 training): the same planted blocks, e5m2, along dim 0
    auto rceil = spec(Fp8Scheme::Mx);
    rceil.mx_scaling = MxScaling::Rceil;
    c.push_back({"mx rceil planted blocks", x, rceil});
    c.push_back({"mx rceil length 70 (padded)", at::randn({5, 70}, g) * 300, rceil});
    auto rceil_e5m2 = rceil;
    rceil_e5m2.element = Fp8Element::E5M2;
    c.push_back({"mx rceil e5m2", at::randn({8, 64}, g) * 100, rceil_e5m2});
    rceil.axis = 0;
    c.push_back({"mx rceil along dim 0", at::randn({64, 24}, g), rceil});
    return c;
}

std::vector<Case> nvfp4_cases(at::Generator& g) {
    std::vector<Case> c;
    auto x = at::randn({16, 64}, g);
    x[0][0] = 50.0;
    x[3].narrow(0, 16, 16).copy_(at::randn({16}, g) * 1e-4);  // a block far below the tensor's amax
    c.push_back({"nvfp4 randn with an outlier", x, spec(Fp8Scheme::Nvfp4)});
    c.push_back({"nvfp4 zeros (per-tensor scale 1)", at::zeros({4, 32}), spec(Fp8Scheme::Nvfp4)});
    // exact E2M1 ties (round half to even): amax 2688 / 4096 makes the per-tensor scale 2^-12, a
    // block of amax 6 / 4096 the block scale 1, so its elements are scaled by 4096 exactly
    auto ties = at::randn({2, 16}, g) * 0.1;
    ties[0][0] = 2688.0 / 4096.0;
    ties[1].copy_(at::tensor({6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f,
                              -3.5f, -5.0f, 0.0f}) /
                  4096.0);
    c.push_back({"nvfp4 ties to even", ties, spec(Fp8Scheme::Nvfp4)});
    c.push_back({"nvfp4 length 40 (padded)", at::randn({6, 40}, g), spec(Fp8Scheme::Nvfp4)});
    c.push_back({"nvfp4 3-d along dim 1", at::randn({2, 3, 48}, g), spec(Fp8Scheme::Nvfp4, Fp8Element::E2M1, 1)});
    c.push_back({"nvfp4 bf16", at::randn({8, 32}, g).to(at::kBFloat16) * 7, spec(Fp8Scheme::Nvfp4)});
    // an amax so small that amax / 2688 is 0 in FP32: the per-tensor scale's reciprocal is inf, an
    // exact zero scales to 0 * inf = NaN, which torchao's E2M1 cast takes as 1.5 (times 0: -0);
    // a block of zeros among them has the block scale 0 / 0 and is NaN in torchao too
    auto tiny = at::randn({8, 32}, g) * 1e-44;
    tiny[0][0] = 0.0;
    tiny[2][5] = 0.0;
    c.push_back({"nvfp4 amax below 2688 x the smallest float (per-tensor scale 0)", tiny, spec(Fp8Scheme::Nvfp4)});
    auto tiny_block = at::randn({4, 32}, g) * 1e-44;
    tiny_block[1].narrow(0, 16, 16).zero_();
    c.push_back({"nvfp4 per-tensor scale 0 with a block of zeros", tiny_block, spec(Fp8Scheme::Nvfp4)});
    return c;
}

std::vector<Case> all_cases() {
    auto g = at::detail::createCPUGenerator(30);
    std::vector<Case> c;
    for (auto part : {tensorwise_cases(g), rowwise_cases(g), mx_cases(g), nvfp4_cases(g)})
        c.insert(c.end(), part.begin(), part.end());
    return c;
}

std::vector<DelayedRun> delayed_runs() {
    std::vector<DelayedRun> r;
    std::vector<float> growing;  // an activation growing 1.5x per step, then a spike, a zero step, a NaN step
    for (int i = 0; i < 16; ++i) growing.push_back(std::pow(1.5f, float(i)));
    growing.insert(growing.end(), {2000.0f, 0.0f, kNan, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 1e-30f, 1e-44f, 1e-44f});
    r.push_back({"e4m3 len 4 margin 0 max", Fp8Element::E4M3, 4, 0, AmaxAlgo::Max, growing});
    r.push_back({"e4m3 len 1 margin 1 max", Fp8Element::E4M3, 1, 1, AmaxAlgo::Max, growing});
    r.push_back({"e5m2 len 16 margin 2 most_recent", Fp8Element::E5M2, 16, 2, AmaxAlgo::MostRecent, growing});
    r.push_back({"e4m3 len 1024 margin -1 max", Fp8Element::E4M3, 1024, -1, AmaxAlgo::Max, growing});
    return r;
}

json case_json(const Case& c) {
    static const char* schemes[] = {"tensorwise", "rowwise", "mx", "nvfp4"};
    return {{"scheme", schemes[int(c.spec.scheme)]},
            {"element", to_string(c.spec.element)},
            {"axis", c.spec.axis},
            {"given_scale", c.spec.given_scale},
            {"mx_scaling", to_string(c.spec.mx_scaling)}};
}

std::string write_temp(const std::string& suffix, const std::string& bytes) {
    std::string path = "/tmp/ampscope-fp8-XXXXXX" + suffix;
    const int fd = mkstemps(path.data(), int(suffix.size()));
    if (fd < 0) return {};
    close(fd);
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return path;
}

/// Runs the oracle on the cases and runs; its JSON.
json run_oracle(const std::vector<Case>& cases, const std::vector<DelayedRun>& runs) {
    c10::impl::GenericList tensors(c10::TensorType::get());
    json cj = json::array(), rj = json::array();
    for (const auto& c : cases) {
        tensors.push_back(c.x);
        cj.push_back(case_json(c));
    }
    for (const auto& r : runs) {
        json amaxes = json::array();  // JSON has no NaN: non-finite values as the oracle's text
        for (float a : r.amaxes)
            amaxes.push_back(std::isfinite(a) ? json(a) : json(std::isnan(a) ? "nan" : a > 0 ? "inf" : "-inf"));
        rj.push_back({{"element", to_string(r.element)},
                      {"history_len", r.history_len},
                      {"margin", r.margin},
                      {"algo", r.algo == AmaxAlgo::Max ? "max" : "most_recent"},
                      {"amaxes", amaxes}});
    }
    const auto bytes = torch::pickle_save(c10::IValue(tensors));
    const auto tpath = write_temp(".pt", std::string(bytes.begin(), bytes.end()));
    const auto cpath = write_temp(".json", cj.dump()), rpath = write_temp(".json", rj.dump());
    const std::string cmd = std::string(AMPSCOPE_PYTHON) + " -W ignore " + AMPSCOPE_TESTS_DIR +
                            "/engine/fp8_oracle.py " + tpath + " " + cpath + " " + rpath;
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[65536];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    for (const auto& f : {tpath, cpath, rpath}) std::remove(f.c_str());
    return out.empty() ? json() : json::parse(out);
}

/// A JSON number or the oracle's "nan"/"inf"/"-inf".
double num(const json& v) {
    if (v.is_number()) return v.get<double>();
    const auto s = v.get<std::string>();
    return s == "nan" ? std::nan("") : s == "inf" ? HUGE_VAL : -HUGE_VAL;
}

bool same(double a, double b) {
    return a == b || (std::isnan(a) && std::isnan(b));
}

class Fp8Oracle : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        cases_ = all_cases();
        runs_ = delayed_runs();
        want_ = run_oracle(cases_, runs_);
    }
    static std::vector<Case> cases_;
    static std::vector<DelayedRun> runs_;
    static json want_;

    /// Every case of `scheme`: the values bitwise, the figures torchao's outputs give.
    void check_scheme(Fp8Scheme scheme);
};
std::vector<Case> Fp8Oracle::cases_;
std::vector<DelayedRun> Fp8Oracle::runs_;
json Fp8Oracle::want_;

void Fp8Oracle::check_scheme(Fp8Scheme scheme) {
    ASSERT_TRUE(want_.is_object()) << "the torchao oracle produced nothing (is torchao installed? tools/bootstrap.sh)";
    int checked = 0;
    for (size_t i = 0; i < cases_.size(); ++i) {
        const auto& c = cases_[i];
        if (c.spec.scheme != scheme) continue;
        ++checked;
        const auto& w = want_["cases"][i];
        QuantStats s;
        const auto q = ampscope::detail::quantize_dequantize(c.x, c.spec, &s);
        // without statistics: a pass's own path (small operands fused into two loops)
        const auto q_alone = ampscope::detail::quantize_dequantize(c.x, c.spec);
        const auto bits = w["bits"].get<std::vector<int32_t>>();
        for (const auto& [how, t] :
             {std::pair<const char*, const at::Tensor&>{"with statistics", q}, {"alone", q_alone}}) {
            ASSERT_EQ(t.sizes().vec(), w["shape"].get<std::vector<int64_t>>()) << c.name;
            const auto flat = t.contiguous().flatten();
            const float* got = flat.const_data_ptr<float>();
            int64_t differ = 0, first = -1;
            for (int64_t k = 0; k < flat.numel(); ++k) {
                float want;
                std::memcpy(&want, &bits[size_t(k)], sizeof want);
                int32_t gb;
                std::memcpy(&gb, &got[k], sizeof gb);
                if (gb != bits[size_t(k)] && !(std::isnan(want) && std::isnan(got[k])))
                    differ += (first < 0 ? first = k : 0, 1);
            }
            EXPECT_EQ(differ, 0) << c.name << " (" << how << "): values differing from torchao, the first at " << first;
        }
        EXPECT_TRUE(same(ampscope::detail::operand_amax(c.x), s.amax)) << c.name;
        EXPECT_EQ(s.numel, w["numel"].get<int64_t>()) << c.name;
        EXPECT_EQ(s.nonfinite, w["nonfinite"].get<int64_t>()) << c.name;
        EXPECT_EQ(s.nonzero, w["nonzero"].get<int64_t>()) << c.name;
        EXPECT_EQ(s.underflow, w["underflow"].get<int64_t>()) << c.name;
        EXPECT_EQ(s.subnormal, w["subnormal"].get<int64_t>()) << c.name;
        EXPECT_EQ(s.saturated, w["saturated"].get<int64_t>()) << c.name;
        EXPECT_EQ(s.nonfinite_out, w["nonfinite_out"].get<int64_t>()) << c.name;
        // each element counted once at most: flushed to zero, subnormal, or saturated
        EXPECT_LE(s.underflow + s.subnormal + s.saturated, s.numel) << c.name;
        EXPECT_TRUE(same(s.amax, num(w["amax"]))) << c.name << ": amax " << s.amax;
        EXPECT_EQ(s.scales, w["scales"].get<int64_t>()) << c.name;
        EXPECT_TRUE(same(s.scale_min, w["scale_min"].is_null() ? std::nan("") : num(w["scale_min"])))
            << c.name << ": " << s.scale_min;
        EXPECT_TRUE(same(s.scale_max, w["scale_max"].is_null() ? std::nan("") : num(w["scale_max"])))
            << c.name << ": " << s.scale_max;
        EXPECT_TRUE(same(float(s.tensor_scale), float(num(w["tensor_scale"])))) << c.name;
        if (w.contains("sqnr_db") && w["sqnr_db"].is_number()) {  // torchao's norms overflow FP32 on 2.5e38 (inf dB)
            EXPECT_NEAR(s.sqnr_db, w["sqnr_db"].get<double>(), 1e-3) << c.name;  // torchao's in FP32
        }
    }
    EXPECT_GT(checked, 0);
}

}  // namespace

TEST_F(Fp8Oracle, TensorwiseBitwiseAsTorchao) {
    check_scheme(Fp8Scheme::Tensorwise);
}
TEST_F(Fp8Oracle, RowwiseBitwiseAsTorchao) {
    check_scheme(Fp8Scheme::Rowwise);
}
TEST_F(Fp8Oracle, MxBitwiseAsTorchao) {
    check_scheme(Fp8Scheme::Mx);
}
TEST_F(Fp8Oracle, Nvfp4BitwiseAsTorchao) {
    check_scheme(Fp8Scheme::Nvfp4);
}

namespace {

const Case& find_case(const std::vector<Case>& cases, const std::string& name) {
    for (const auto& c : cases)
        if (c.name == name) return c;
    throw std::runtime_error("no case " + name);
}

}  // namespace

// The planted cases say what happened to them, in the statistics (independently of the oracle).
TEST_F(Fp8Oracle, PlantedCasesAreNamedInTheStatistics) {
    QuantStats s;
    // a stale scale of 1: 1000, -3000, 465 and 2.5e38 saturate E4M3; 464 rounds to 448 unclamped
    ampscope::detail::quantize_dequantize(find_case(cases_, "tensorwise e4m3 given scale saturates").x,
                                          spec(Fp8Scheme::Tensorwise, Fp8Element::E4M3, -1, 1.0f), &s);
    EXPECT_EQ(s.saturated, 4);
    // E5M2: 61440 (the tie) rounds out of range, 61439 does not; 1e4 * randn values beyond it too
    const auto& c5 = find_case(cases_, "tensorwise e5m2 given scale saturates");
    ampscope::detail::quantize_dequantize(c5.x, c5.spec, &s);
    EXPECT_EQ(s.saturated, (at::abs(c5.x) >= 61440).sum().item<int64_t>());
    EXPECT_GE(s.saturated, 1);
    // gradients of 1e-12 .. 1e2 in E5M2 with the current scale: the smallest underflow to zero
    const auto& cg = find_case(cases_, "tensorwise e5m2 gradient underflow");
    ampscope::detail::quantize_dequantize(cg.x, cg.spec, &s);
    EXPECT_GT(s.underflow, 0);
    EXPECT_GT(s.subnormal, 0);
    EXPECT_EQ(s.saturated, 0);  // current scaling never saturates
    // MX: the outlier's block (row 0, elements 0..31) keeps only the outlier
    const auto& cm = find_case(cases_, "mx e4m3 planted blocks");
    const auto q = ampscope::detail::quantize_dequantize(cm.x, cm.spec, &s);
    const auto block = q[0].narrow(0, 0, 32);
    EXPECT_EQ((block != 0).sum().item<int64_t>(), 1);
    EXPECT_EQ(block[5].item<float>(),
              10240.0f);  // scale 2^(13 - 8); 1e4 / 32 = 312.5 -> 320 in E4M3 (step 32 above 256)
    EXPECT_GE(s.underflow, 31);
    EXPECT_GE(s.saturated, 1);       // 490 in its block
    EXPECT_EQ(s.nonfinite_out, 31);  // the NaN block: its 31 finite values dequantize to NaN
    // zeros: exact, nothing counted, SQNR infinite
    ampscope::detail::quantize_dequantize(at::zeros({4, 32}), spec(Fp8Scheme::Nvfp4), &s);
    EXPECT_EQ(s.underflow + s.subnormal + s.saturated + s.nonfinite_out, 0);
    EXPECT_TRUE(std::isinf(s.sqnr_db));
    // nothing finite to compare (was +inf, "exact"): NaN, and so after merging two such batches; a
    // batch with finite values gives the merged SQNR its value
    for (const auto& x : {at::full({4, 32}, NAN), at::full({4, 32}, INFINITY)}) {
        ampscope::QuantStats all_bad;
        ampscope::detail::quantize_dequantize(x, spec(Fp8Scheme::Tensorwise), &all_bad);
        EXPECT_TRUE(std::isnan(all_bad.sqnr_db));
        auto merged = all_bad;
        merged.merge(all_bad);
        EXPECT_TRUE(std::isnan(merged.sqnr_db));
        ampscope::QuantStats fine;
        ampscope::detail::quantize_dequantize(at::linspace(-3, 5, 128).reshape({4, 32}), spec(Fp8Scheme::Tensorwise),
                                              &fine);
        merged.merge(fine);
        EXPECT_TRUE(std::isfinite(merged.sqnr_db));
        EXPECT_DOUBLE_EQ(merged.sqnr_db, fine.sqnr_db);
    }
}

// DelayedScaling against Transformer Engine's rule (the oracle's Python reference): the scale every
// step uses, the history after the last step, and the step at which a growing activation outruns
// the stale scale (its amax times the step's scale rounds beyond E4M3's range).
TEST_F(Fp8Oracle, DelayedScalingAsTransformerEngine) {
    ASSERT_TRUE(want_.is_object()) << "the oracle produced nothing";
    for (size_t i = 0; i < runs_.size(); ++i) {
        const auto& r = runs_[i];
        const auto& w = want_["delayed"][i];
        DelayedScaling d(r.element, r.history_len, r.margin, r.algo);
        int first_saturated = -1, want_first = -1;
        for (size_t t = 0; t < r.amaxes.size(); ++t) {
            const double want_scale = num(w["scales"][t]);
            EXPECT_EQ(d.scale(), float(want_scale)) << r.name << " step " << t;
            const double fmax_tie = r.element == Fp8Element::E4M3 ? 464.0 : 61440.0;
            if (first_saturated < 0 && double(r.amaxes[t]) * d.scale() > fmax_tie) first_saturated = int(t);
            if (want_first < 0 && double(r.amaxes[t]) * want_scale > fmax_tie) want_first = int(t);
            d.record(r.amaxes[t]);
            d.update();
        }
        EXPECT_EQ(first_saturated, want_first) << r.name;
        for (size_t k = 0; k < d.history().size(); ++k)
            EXPECT_TRUE(same(d.history()[k], num(w["history"][k]))) << r.name << " slot " << k;
        EXPECT_EQ(d.steps(), int(r.amaxes.size()));
    }
    // the growing activation outruns a one-step-stale scale at its first step above the previous
    // amax by more than the tie's headroom: 1.5^t with scale 448 / 1.5^(t-1) gives 672 > 464
    DelayedScaling d(Fp8Element::E4M3, 4, 0, AmaxAlgo::Max);
    int outrun = -1;
    for (int t = 0; t < 6 && outrun < 0; ++t) {
        const float amax = std::pow(1.5f, float(t));
        auto x = at::full({2, 16}, amax);
        QuantStats s;
        ampscope::detail::quantize_dequantize(x, spec(Fp8Scheme::Tensorwise, Fp8Element::E4M3, -1, d.scale()), &s);
        if (s.saturated > 0) outrun = t;
        d.record(float(s.amax));
        d.update();
    }
    EXPECT_EQ(outrun, 1);  // step 0 uses the initial scale 1 (1 * 1 fits), step 1 the scale 448 of step 0
}

#include "precision/fp8_pass.h"
#include "precision/precision.h"

// The FP8 pass's hook: under BF16 autocast and an Fp8PassGuard, aten::linear is torchao's emulated
// Float8Linear (mm of the E4M3 quantize-dequantized operands in FP32, cast to BF16, + bias in BF16);
// without the guard, or with autocast off (an FP32 region), it is the ordinary linear.
/// round_e4m3 / round_e5m2 (the fused path's element rounding, bit arithmetic) against ATen's cast
/// to float8 and back, over every 61st FP32 bit pattern from 0 to the format's largest finite
/// value, both signs, the midpoints between neighbouring elements (the ties) and their FP32
/// neighbours, and NaNs of either sign and payload (the same NaN bits as the cast gives).
TEST(Fp8Round, TheSameValuesAsACastToFloat8AndBack) {
    for (const auto element : {Fp8Element::E4M3, Fp8Element::E5M2}) {
        const float fmax = float(max_finite(element));
        const auto dtype = element == Fp8Element::E4M3 ? at::kFloat8_e4m3fn : at::kFloat8_e5m2;
        const auto round = element == Fp8Element::E4M3 ? ampscope::detail::round_e4m3 : ampscope::detail::round_e5m2;
        uint32_t top;
        std::memcpy(&top, &fmax, sizeof top);
        std::vector<float> v;
        for (uint32_t b = 0; b <= top; b += 61) {
            float f;
            std::memcpy(&f, &b, sizeof f);
            v.push_back(f);
            v.push_back(-f);
        }
        // every element value (all 256 codes) and the ties between neighbours, with their neighbours
        const auto codes = at::arange(256, at::kInt).to(at::kByte).view(dtype).to(at::kFloat);
        const auto grid = std::get<0>(codes.masked_select(at::isfinite(codes)).sort());
        const float* gv = grid.const_data_ptr<float>();
        for (int64_t i = 0; i + 1 < grid.numel(); ++i) {
            const float mid = gv[i] + (gv[i + 1] - gv[i]) / 2;
            for (const float f : {gv[i], mid, std::nextafter(mid, -kInf), std::nextafter(mid, kInf)})
                if (std::fabs(f) <= fmax) v.push_back(f);
        }
        for (const uint32_t nan_bits :
             {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFA12345u}) {  // quiet, signalling, signs
            float f;
            std::memcpy(&f, &nan_bits, sizeof f);
            v.push_back(f);
        }
        const auto x = at::from_blob(v.data(), {int64_t(v.size())}, at::kFloat);
        const auto want = x.to(dtype).to(at::kFloat);
        const float* w = want.const_data_ptr<float>();
        int64_t differ = 0;
        float first = 0;
        for (size_t i = 0; i < v.size(); ++i) {
            const float got = round(v[i]);
            if (std::memcmp(&got, &w[i], sizeof got) == 0) continue;  // NaN too: the same bits
            if (differ++ == 0) first = v[i];
        }
        EXPECT_EQ(differ, 0) << (element == Fp8Element::E4M3 ? "e4m3" : "e5m2") << ": " << v.size()
                             << " values, the first differing " << first;
        // the same values through a pass's loop (vectorized, in chunks across threads), scale 1
        const auto loop = ampscope::detail::quantize_dequantize(x, spec(Fp8Scheme::Tensorwise, element, -1, 1.0f));
        EXPECT_TRUE(at::equal(loop.view(at::kInt), want.view(at::kInt))) << "the quantize loop differs from the cast";
    }
}

TEST(Fp8Pass, LinearRunsOnQuantizedOperandsUnderTheGuard) {
    auto g = at::detail::createCPUGenerator(7);
    const auto x = at::randn({6, 32}, g) * 3, w = at::randn({24, 32}, g), b = at::randn({24}, g);
    QuantSpec s;
    const auto want =
        at::mm(ampscope::detail::quantize_dequantize(x, s), ampscope::detail::quantize_dequantize(w, s).t())
            .to(at::kBFloat16) +
        b.to(at::kBFloat16);
    at::Tensor got, plain, off;
    {
        ampscope::detail::AutocastGuard amp(at::kCPU, Precision::Bf16, false);
        plain = at::linear(x, w, b);
        ampscope::detail::Fp8PassGuard fp8(Precision::Fp8);
        got = at::linear(x, w, b);
        ampscope::detail::AutocastGuard fp32(at::kCPU, Precision::Fp32, false);
        off = at::linear(x, w, b);
    }
    EXPECT_EQ(got.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::equal(got, want)) << (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<float>();
    EXPECT_FALSE(at::equal(got, plain));
    EXPECT_TRUE(at::equal(off, at::linear(x, w, b)));
    EXPECT_TRUE(at::equal(at::linear(x, w, b), x.matmul(w.t()) + b));  // the guard left nothing behind
}

#include "model/model.h"

// The demo models (LibTorch's nn::Linear calls addmm/matmul, not aten::linear) take the FP8 pass
// too: demo:mlp under the guard equals its three linears computed as the pass's linear is, with
// ReLU between; outside the guard it is its BF16 self.
TEST(Fp8Pass, DemoModelLinearsAreQuantized) {
    auto model = ampscope::detail::load_model("demo:mlp", 0);
    model->set_train(false);
    std::map<std::string, at::Tensor> p;
    for (const auto& [name, t] : model->named_state()) p[name] = t;
    auto g = at::detail::createCPUGenerator(3);
    const auto x = at::randn({5, 32}, g) * 4;
    QuantSpec s;
    auto lin = [&](const at::Tensor& v, const std::string& m) {
        return at::mm(ampscope::detail::quantize_dequantize(v, s),
                      ampscope::detail::quantize_dequantize(p[m + ".weight"], s).t())
                   .to(at::kBFloat16) +
               p[m + ".bias"].to(at::kBFloat16);
    };
    const auto want = lin(at::relu(lin(at::relu(lin(x, "fc1")), "fc2")), "out");
    at::NoGradGuard no_grad;
    at::Tensor got, bf16;
    {
        ampscope::detail::AutocastGuard amp(at::kCPU, Precision::Bf16, false);
        bf16 = model->forward({x});
        ampscope::detail::Fp8PassGuard fp8(Precision::Fp8);
        got = model->forward({x});
    }
    EXPECT_TRUE(at::equal(got, want)) << (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<float>();
    EXPECT_FALSE(at::equal(got, bf16));
}

// The FP8 what-if in a BF16 pass of a demo model (whose nn::Linear never reaches aten::linear):
// the outputs are the plain BF16 pass's bitwise (demo:transformer's 3-D linears included: were
// they routed through aten::linear, the bias would be added in BF16 after the matmul), and every
// linear's input and weight are counted once per recipe.
TEST(Fp8Pass, WhatIfLeavesDemoPassesAsTheyAre) {
    for (const char* name : {"demo:mlp", "demo:transformer"}) {
        auto model = ampscope::detail::load_model(name, 0);
        model->set_train(false);
        auto g = at::detail::createCPUGenerator(4);
        const auto x = std::string(name) == "demo:mlp" ? at::randn({5, 32}, g) * 4 : at::randn({3, 8, 16}, g) * 4;
        at::NoGradGuard no_grad;
        at::Tensor plain, what_if;
        std::vector<Fp8Operand> sink;
        {
            ampscope::detail::AutocastGuard amp(at::kCPU, Precision::Bf16, false);
            plain = model->forward({x});
            ampscope::detail::Fp8WhatIfGuard guard(&sink);
            what_if = model->forward({x});
        }
        EXPECT_TRUE(at::equal(what_if, plain)) << name;
        std::set<std::string> linears, keys;
        for (const auto& o : sink) {
            linears.insert(o.module);
            keys.insert(o.module + "/" + o.operand + "/" + to_string(o.stats.scheme));
        }
        EXPECT_EQ(keys.size(), sink.size()) << name << ": one entry per module, operand and recipe";
        EXPECT_EQ(sink.size(), linears.size() * 2 * 4) << name;
        EXPECT_GE(linears.size(), 3u) << name;
        EXPECT_EQ(linears.count(""), 0u) << name << ": every linear named by its module";
    }
}

/// round_e2m1 (NVFP4's element rounding, bit arithmetic) against the grid written out: every FP32
/// step of 2^-12 over [-8, 8], each grid value's ties and their neighbours; ties go to the even
/// code (0 / 0.5 / 1 / 1.5 / 2 / 3 / 4 / 6 are codes 0-7), beyond 6 saturates, NaN is 1.5 with
/// its sign (torchao's f32_to_f4_unpacked: codes 3 and 11; Fp8Oracle's per-tensor-scale-0 cases).
TEST(Fp8Round, E2m1AsTheGridWrittenOut) {
    static constexpr float kGrid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const auto want = [](float v) {
        const float a = std::min(std::fabs(v), 6.0f);  // saturates
        int best = 7;
        for (int i = 0; i < 8; ++i) {
            const float d = std::fabs(a - kGrid[i]), db = std::fabs(a - kGrid[best]);
            if (d < db || (d == db && i % 2 == 0 && best % 2 == 1)) best = i;
        }
        return std::copysign(kGrid[best], v);
    };
    std::vector<float> v;
    for (int i = -32768; i <= 32768; ++i) v.push_back(std::ldexp(float(i), -12));
    for (int i = 0; i + 1 < 8; ++i) {
        const float mid = (kGrid[i] + kGrid[i + 1]) / 2;
        for (const float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf), 1e-30f, 3e38f})
            v.insert(v.end(), {f, -f});
    }
    int64_t differ = 0;
    for (const float f : v)
        if (ampscope::detail::round_e2m1(f) != want(f))
            ADD_FAILURE() << f << " -> " << ampscope::detail::round_e2m1(f) << ", want " << want(f), ++differ;
    EXPECT_EQ(differ, 0);
    EXPECT_EQ(ampscope::detail::round_e2m1(std::fabs(kNan)), 1.5f);
    EXPECT_EQ(ampscope::detail::round_e2m1(-std::fabs(kNan)), -1.5f);
    EXPECT_EQ(ampscope::detail::round_e2m1(-kInf), -6.0f);
}

/// A pass's own path (no statistics: the fused loops, split across threads on a large operand)
/// gives the bits of the statistics path, which Fp8Oracle proves torchao's: every scheme, operands
/// of several chunks, lengths that are not a multiple of the block, another axis, NVFP4's tiles
/// on sides that are not multiples of 16, NaN and Inf planted, BF16 operands.
TEST(Fp8Fused, TheSameBitsAsTheStatisticsPath) {
    at::set_num_threads(4);  // several chunks even on a small machine
    auto g = at::detail::createCPUGenerator(21);
    auto big = at::randn({300, 250}, g) * at::pow(10.0, at::rand({300, 1}, g) * 8 - 4);  // 75,000 elements
    big[7][9] = kNan;
    big[200][3] = kInf;
    big[299].narrow(0, 0, 64).zero_();
    const auto finite = at::nan_to_num(big, 0.0, 0.0, 0.0);
    QuantSpec rceil = spec(Fp8Scheme::Mx), tiles = spec(Fp8Scheme::Nvfp4), e5m2_rows = spec(Fp8Scheme::Rowwise);
    rceil.mx_scaling = MxScaling::Rceil;
    tiles.tiles_2d = true;
    e5m2_rows.element = Fp8Element::E5M2;
    const std::vector<std::pair<const char*, QuantSpec>> specs = {
        {"tensorwise", spec(Fp8Scheme::Tensorwise)},
        {"tensorwise e5m2 given scale", spec(Fp8Scheme::Tensorwise, Fp8Element::E5M2, -1, 3.0f)},
        {"rowwise", spec(Fp8Scheme::Rowwise)},
        {"rowwise along dim 0", spec(Fp8Scheme::Rowwise, Fp8Element::E4M3, 0)},
        {"rowwise e5m2", e5m2_rows},
        {"mx floor", spec(Fp8Scheme::Mx)},
        {"mx floor e5m2 along dim 0", spec(Fp8Scheme::Mx, Fp8Element::E5M2, 0)},
        {"mx rceil", rceil},
        {"nvfp4", spec(Fp8Scheme::Nvfp4)},
        {"nvfp4 along dim 0", spec(Fp8Scheme::Nvfp4, Fp8Element::E2M1, 0)},
        {"nvfp4 tiles", tiles}};
    const std::vector<std::pair<const char*, at::Tensor>> operands = {
        {"large with nan and inf", big},
        {"large finite", finite},
        {"bf16 3-d", finite.narrow(0, 0, 96).reshape({4, 24, 250}).to(at::kBFloat16)},
        {"one row of 70", at::randn({1, 70}, g)},
        {"zeros", at::zeros({18, 33})}};
    int compared = 0;
    for (const auto& [sname, sp] : specs)
        for (const auto& [oname, x] : operands) {
            if (sp.tiles_2d && x.dim() != 2) continue;
            QuantStats st;
            const auto want = ampscope::detail::quantize_dequantize(x, sp, &st);
            const auto got = ampscope::detail::quantize_dequantize(x, sp);
            ASSERT_EQ(got.sizes(), want.sizes()) << sname << ", " << oname;
            const auto same_bits = (got.view(at::kInt) == want.view(at::kInt)) | (at::isnan(got) & at::isnan(want));
            EXPECT_TRUE(at::all(same_bits).item<bool>())
                << sname << ", " << oname << ": " << (~same_bits).sum().item<int64_t>() << " values differ";
            ++compared;
        }
    EXPECT_EQ(compared, 11 * 5 - 1);
}

/// NVFP4's training quantization (QuantSpec::tiles_2d, ::stochastic): a weight whose sides are not
/// multiples of 16 is tiled as its zero-padded copy is (zeros change no tile's amax), a tile
/// shares one scale (an outlier coarsens its 15 row neighbours' blocks), and
/// stochastic rounding picks one of a value's two E2M1 neighbours, the same ones after a reseed.
TEST(Nvfp4Training, TilesPadWithZerosAndShareOneScale) {
    auto g = at::detail::createCPUGenerator(11);
    auto w = at::randn({20, 40}, g);
    w[3][5] = 200.0f;
    QuantSpec tiles = ampscope::detail::recipe_spec(ampscope::Precision::Nvfp4);
    tiles.tiles_2d = true;
    const auto q = ampscope::detail::quantize_dequantize(w, tiles);
    const auto padded = at::constant_pad_nd(w, {0, 8, 0, 12});
    const auto want = ampscope::detail::quantize_dequantize(padded, tiles).narrow(0, 0, 20).narrow(1, 0, 40);
    EXPECT_TRUE(at::equal(q, want));
    const auto rows =
        ampscope::detail::quantize_dequantize(w, ampscope::detail::recipe_spec(ampscope::Precision::Nvfp4));
    // row 0 shares the outlier's tile (rows 0-15, columns 0-15) but not its 1 x 16 block
    EXPECT_FALSE(at::equal(q[0].narrow(0, 0, 16), rows[0].narrow(0, 0, 16)));
    // rows repeated within each tile: a tile's amax is each of its row blocks', so tiles change nothing
    const auto same = w.narrow(0, 0, 2).repeat_interleave(16, 0);
    const auto nvfp4 = ampscope::detail::recipe_spec(ampscope::Precision::Nvfp4);
    EXPECT_TRUE(at::equal(ampscope::detail::quantize_dequantize(same, tiles),
                          ampscope::detail::quantize_dequantize(same, nvfp4)));
    EXPECT_THROW(ampscope::detail::quantize_dequantize(at::zeros({2, 16, 16}), tiles), std::invalid_argument);
}

TEST(Nvfp4Training, StochasticRoundingPicksANeighbourAndFollowsTheSeed) {
    auto g = at::detail::createCPUGenerator(12);
    const auto x = at::randn({64, 32}, g) * 4;
    QuantSpec rtn = ampscope::detail::recipe_spec(ampscope::Precision::Nvfp4);
    QuantSpec sr = rtn;
    sr.stochastic = true;
    at::manual_seed(5);
    const auto a = ampscope::detail::quantize_dequantize(x, sr);
    at::manual_seed(5);
    EXPECT_TRUE(at::equal(a, ampscope::detail::quantize_dequantize(x, sr)));
    const auto b = ampscope::detail::quantize_dequantize(x, sr);  // the generator moved on
    EXPECT_FALSE(at::equal(a, b));
    const auto near = ampscope::detail::quantize_dequantize(x, rtn);
    EXPECT_FALSE(at::equal(a, near));
    // each value lies between its stochastic result and its nearest one, or equals both
    EXPECT_TRUE(at::all(((a - x) * (near - x) <= 0) | (a == near)).item<bool>());
}

/// fp8-delayed training's rewind (a diagnostic re-run of micro-batch k of a step): the slots as
/// that micro-batch cast with, the current ones back afterwards; a slot the re-run creates does not
/// reach the current ones; an index the step did not keep changes nothing.
TEST(DelayedTraining, RewindCastsWithTheMicroBatchsScalesAndRestores) {
    using ampscope::detail::DelayedTraining;
    DelayedTraining d({4, 0});
    const auto x = at::full({8}, 100.0f);
    d.begin_micro_batch(true);
    d.cast(x, "fc1/input", Fp8Element::E4M3);  // scale 1: the first micro-batch
    d.end_micro_batch();                       // scale 448 / 100
    d.begin_micro_batch(true);
    d.cast(x * 2, "fc1/input", Fp8Element::E4M3);
    d.end_micro_batch();
    const float now = d.slots.at("fc1/input").scale();
    EXPECT_FLOAT_EQ(now, 448.0f / 200.0f);
    {
        DelayedTraining::Rewind r(&d, 0);
        EXPECT_TRUE(d.slots.empty());  // before the first micro-batch: no slot yet
        d.slot("fc2/input", Fp8Element::E4M3);
    }
    EXPECT_EQ(d.slots.size(), 1u);
    EXPECT_FLOAT_EQ(d.slots.at("fc1/input").scale(), now);
    {
        DelayedTraining::Rewind r(&d, 1);
        EXPECT_FLOAT_EQ(d.slots.at("fc1/input").scale(), 448.0f / 100.0f);
    }
    {
        DelayedTraining::Rewind r(&d, 7);  // not kept: nothing changes
        EXPECT_FLOAT_EQ(d.slots.at("fc1/input").scale(), now);
    }
    d.end_step();
    DelayedTraining::Rewind r(&d, 0);  // the step's kept scales are dropped
    EXPECT_FLOAT_EQ(d.slots.at("fc1/input").scale(), now);
}

/// A diagnostic re-run of a step under DelayedTrainingScope::Quiet (train's forward_origin) casts
/// with the step's scales and counts nothing: the step's clamped elements are its own (the re-run
/// once counted them again: 258 where Transformer Engine counts 129), and its histories are the
/// step's (the rewound slots the re-run cast with are set aside after it).
TEST(DelayedTraining, AQuietReRunRecordsNothing) {
    using ampscope::detail::DelayedTraining;
    using ampscope::detail::DelayedTrainingScope;
    for (const bool quiet : {true, false}) {
        DelayedTraining d({4, 0});
        DelayedTrainingScope scope(&d);
        d.begin_micro_batch(true);
        d.cast(at::full({8}, 100.0f), "fc1/input", Fp8Element::E4M3);  // scale 1: 100 is within 448
        d.end_micro_batch();                                           // scale 448 / 100
        d.begin_micro_batch(true);
        const auto x = at::full({8}, 300.0f);  // beyond the stale scale's range: clamped
        d.cast(x, "fc1/input", Fp8Element::E4M3);
        const int64_t clamped = d.saturated;
        EXPECT_EQ(clamped, 8);
        {
            std::optional<DelayedTrainingScope::Quiet> q;
            if (quiet) q.emplace();
            DelayedTraining::Rewind r(&d, 1);  // the re-run of micro-batch 1
            d.cast(x * 10, "fc1/input", Fp8Element::E4M3);
        }
        d.end_micro_batch();
        EXPECT_EQ(d.saturated == clamped, quiet) << quiet;
        // the re-run cast with the rewound slots, set aside after it: the histories keep the step's
        EXPECT_FLOAT_EQ(d.slots.at("fc1/input").scale(), 448.0f / 300.0f) << quiet;
    }
}

/// TrainSpec::fp8_weight_cache (TE's is_first_microbatch): the step's first micro-batch casts the
/// weight; the later ones get that cast back (made with the scale before the update) and record no
/// amax, so a history of one keeps its scale; the next step casts again; without the cache each
/// micro-batch casts with the scale of the moment.
TEST(DelayedTraining, WeightCacheReusesTheFirstMicroBatchsCast) {
    using ampscope::detail::DelayedTraining;
    const auto w = at::full({4}, 3.0f) + at::arange(4, at::kFloat) / 7;
    for (const bool cache : {true, false}) {
        DelayedTraining d({1, 0});
        d.weight_cache = cache;
        d.begin_micro_batch(false);
        const auto first = d.cast_weight(w, "fc1/weight");  // scale 1
        d.end_micro_batch();                                // scale 448 / amax
        const float after = d.slots.at("fc1/weight").scale();
        EXPECT_GT(after, 1.0f);
        d.begin_micro_batch(false);
        const auto second = d.cast_weight(w, "fc1/weight");
        EXPECT_EQ(at::equal(second, first), cache) << cache;  // scale 1 again, or the new one
        d.end_micro_batch();
        // cached: no amax recorded, so the one-entry history holds 0 and the scale stays
        EXPECT_FLOAT_EQ(d.slots.at("fc1/weight").scale(), after);
        d.end_step();
        d.begin_micro_batch(false);
        EXPECT_FALSE(at::equal(d.cast_weight(w, "fc1/weight"), first)) << "a new step casts anew";
    }
}
