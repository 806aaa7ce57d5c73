// SPDX-License-Identifier: MIT
// Probe sets: built-in generators for the demo models, .pt (torch.save dict) and CSV loaders.
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/hash.h"
#include "probes/probe_csv.h"
#include "probes/probes.h"
#include "precision/precision.h"
#include "torchsave/pt_archive.h"

namespace ampscope::detail {
namespace {

std::string shape_str(at::IntArrayRef s) {
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
    return o.str() + "]";
}

std::string id_for(const std::string& tag, int i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s-%03d", tag.c_str(), i);
    return buf;
}

/// FP32 forward with autocast explicitly off, no grad, eval mode.
at::Tensor reference_forward(Model& model, const at::Tensor& x) {
    torch::NoGradGuard ng;
    AutocastGuard fp32(at::kCPU, Precision::Fp32);  // restored also when forward throws
    model.set_train(false);
    return model.forward({x}).to(at::kFloat);
}

// ---- demo generators ---------------------------------------------------------------------

using AddSample = std::function<void(at::Tensor, const std::string&, int)>;

/// Edge samples: values near the FP16 limit in some positions, FP16-subnormal and
/// flush-to-zero magnitudes and exact zeros in others. Large values are signed to follow the
/// first layer's weights so that they overflow FP16 (65504) after that layer, not before.
void add_edge_samples(Model& model, const std::vector<int64_t>& full, at::Generator& gen, const AddSample& add) {
    at::Tensor w0;
    for (auto& [name, t] : model.named_state())
        if (name.find("weight") != std::string::npos && t.dim() == 2) {
            w0 = t.detach().cpu();
            break;
        }
    const int64_t last = full.back();
    for (int i = 0; i < 8; ++i) {
        auto x = at::randn(full, gen);
        auto flat = x.view({-1, last});
        const int64_t positions = flat.size(0);
        const auto row = w0.defined() ? w0[i % w0.size(0)].sign() : at::ones({last});
        const double big = 60000.0 + 500.0 * i;  // < 65504: representable, overflows after
        flat[0].copy_(row * big * (i % 2 ? -1 : 1));
        if (positions > 1) flat[1].fill_(1e-7);  // FP16 subnormal
        if (positions > 2) flat[2].zero_();
        if (positions > 3) flat[3].fill_(3e-9 * (i + 1));  // flushes to zero in FP16
        if (positions == 1) {                              // flat inputs: mix in one row
            flat[0].narrow(0, last / 2, last - last / 2).fill_(1e-7);
            flat[0][last - 1] = 0.0;
        }
        add(x, "edge", i);
    }
}

/// Boundary samples: bisect between two ordinary-like samples with different decisions until
/// the FP32 top-2 margin is below 1e-4 (well inside the 1e-3 the brief asks).
void add_boundary_samples(Model& model, const std::vector<int64_t>& full, at::Generator& gen, const AddSample& add) {
    int made = 0;
    for (int attempt = 0; attempt < 400 && made < 8; ++attempt) {
        auto a = at::randn(full, gen), b = at::randn(full, gen);
        auto ya = reference_forward(model, a), yb = reference_forward(model, b);
        if (ya.argmax(1).item<int64_t>() == yb.argmax(1).item<int64_t>()) continue;
        at::Tensor lo = a, hi = b;
        const auto cls_lo = ya.argmax(1).item<int64_t>();
        at::Tensor mid;
        double m = 1.0;
        for (int it = 0; it < 60; ++it) {
            mid = (lo + hi) * 0.5;
            auto y = reference_forward(model, mid);
            auto top = std::get<0>(y.topk(2, 1));
            m = (top[0][0] - top[0][1]).item().toDouble();
            if (m < 1e-4 && m > 0) break;
            (y.argmax(1).item<int64_t>() == cls_lo ? lo : hi) = mid;
        }
        if (m < 1e-4 && m > 0) add(mid, "boundary", made++);
    }
}

ProbeSet demo_probes(Model& model, uint64_t seed) {
    ProbeSet ps;
    const auto& shape = model.input_shapes.at(0);
    std::vector<int64_t> full = {1};
    full.insert(full.end(), shape.begin(), shape.end());
    const bool classifier = model.num_outputs >= 2;
    auto gen = at::detail::createCPUGenerator(seed + 12345);
    std::vector<at::Tensor> rows;
    const AddSample add = [&](at::Tensor x, const std::string& tag, int i) {
        rows.push_back(std::move(x));
        ps.samples.push_back({id_for(tag, i), tag});
    };
    for (int i = 0; i < 24; ++i) add(at::randn(full, gen), "ordinary", i);  // standard normal features
    add_edge_samples(model, full, gen, add);
    if (classifier) add_boundary_samples(model, full, gen, add);
    ps.inputs.push_back(at::cat(rows, 0).contiguous());
    auto ref = reference_forward(model, ps.inputs[0]);
    if (classifier) {
        // labels: the reference model's own decisions (an untrained demo has no truth)
        auto d = ref.argmax(1);
        ps.labels.assign(d.data_ptr<int64_t>(), d.data_ptr<int64_t>() + d.numel());
    } else {
        // regressor targets: a smooth function of the features, sum(sin(x)) / 4
        auto t = (ps.inputs[0].flatten(1).clamp(-100, 100).sin().sum(1, true) / 4.0).contiguous();
        ps.targets.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
        ps.target_width = 1;
    }
    Sha256 h;
    h.update(ps.inputs[0].data_ptr(), ps.inputs[0].nbytes());
    for (const auto& s : ps.samples) h.update(s.id + "\n" + s.tag + "\n");
    ps.info.sha256 = h.hex();
    return ps;
}

// ---- .pt loader ---------------------------------------------------------------------------

std::vector<char> read_all(const std::string& path) {
    return read_regular_file(path, "", "a .pt or .csv file");
}

/// What a probe-file field holds: a model input (floating, integer or bool), integer labels or
/// float targets.
enum class Want { Input, Floating, Integer };

at::Tensor as_tensor(const c10::IValue& v, const PtArchive& ar, const std::string& file, const std::string& field,
                     Want want) {
    if (!v.isTensor()) throw InputError(file, field, "expected a Tensor, found " + v.tagKind());
    const auto& raw = v.toTensor();
    check_tensor_fits(raw, ar.bytes_for(raw), file, field);  // before any element is read
    const auto st = raw.scalar_type();
    const std::string found = std::string(c10::toString(st)) + " " + shape_str(raw.sizes());
    const bool floating = at::isFloatingType(st) && !at::isComplexType(st);
    // token ids, positions (integer) and masks (bool) keep their dtype: autocast never touches them
    const bool token =
        st == at::kLong || st == at::kInt || st == at::kShort || st == at::kChar || st == at::kByte || st == at::kBool;
    if (want == Want::Input && !floating && !token)
        throw InputError(file, field,
                         "expected a floating-point (float32, float64, float16, bfloat16), integer (int64, int32, "
                         "int16, int8, uint8) "
                         "or bool Tensor, found " +
                             found);
    if (want == Want::Floating && !floating)
        throw InputError(file, field,
                         "expected a floating-point Tensor (float32, float64, float16 or bfloat16), found " + found);
    if (want == Want::Integer && (!at::isIntegralType(st, /*includeBool=*/false)))
        throw InputError(file, field, "expected an integer Tensor (int64 class indices), found " + found);
    auto t = raw.detach();
    if (floating && want != Want::Integer) t = t.to(at::kFloat);
    // int16, int8, uint8 inputs widened: PyTorch's embedding indexes with int64 or int32 only
    if (want == Want::Input && (st == at::kShort || st == at::kChar || st == at::kByte)) t = t.to(at::kLong);
    return t.contiguous();
}

/// Class labels [N] (>= 0), or token labels [N, T] (>= 0 or -100, ignored) for sequence outputs.
void read_labels(const c10::IValue& v, const PtArchive& ar, const std::string& path, int64_t n, ProbeSet& ps) {
    auto l = as_tensor(v, ar, path, "labels", Want::Integer);
    if (l.dim() != 1 && l.dim() != 2)
        throw InputError(path, "labels",
                         "expected an integer Tensor [N] (class labels) or [N, T] (token labels), found " +
                             std::string(c10::toString(l.scalar_type())) + " " + shape_str(l.sizes()));
    if (l.size(0) != n)
        throw InputError(path, "labels",
                         "has " + std::to_string(l.size(0)) + " entries; expected " + std::to_string(n) +
                             " (one per sample in inputs)");
    ps.label_width = l.dim() == 2 ? int(l.size(1)) : 0;
    if (l.dim() == 2 && l.size(1) == 0)
        throw InputError(path, "labels", "token labels [N, 0]: expected at least one position");
    l = l.to(at::kLong).contiguous();
    ps.labels.assign(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
    const int64_t w = std::max(1, ps.label_width);
    for (size_t i = 0; i < ps.labels.size(); ++i) {
        const int64_t x = ps.labels[i];
        if (x >= 0 || (ps.label_width > 0 && x == -100)) continue;
        const std::string at = ps.label_width > 0 ? "sample " + std::to_string(int64_t(i) / w) + ", position " +
                                                        std::to_string(int64_t(i) % w)
                                                  : "sample " + std::to_string(i);
        throw InputError(path, "labels",
                         "label " + std::to_string(x) + " of " + at + " is negative; expected " +
                             (ps.label_width > 0 ? "a token id >= 0 or -100 (ignored)" : "a class index >= 0"));
    }
}

std::vector<std::string> as_strings(const c10::IValue& v, const std::string& file, const std::string& field) {
    std::vector<std::string> out;
    if (v.isList()) {
        for (const auto& e : v.toListRef()) {
            if (!e.isString())
                throw InputError(file, field, "expected a list of str, found an element of type " + e.tagKind());
            out.push_back(e.toStringRef());
        }
    } else if (v.isTuple()) {
        for (const auto& e : v.toTupleRef().elements()) {
            if (!e.isString())
                throw InputError(file, field, "expected a list of str, found an element of type " + e.tagKind());
            out.push_back(e.toStringRef());
        }
    } else {
        throw InputError(file, field, "expected a list of str, found " + v.tagKind());
    }
    return out;
}

/// A probe file's per-sample strings (`key`: ids or tags), n of them; empty when absent.
std::vector<std::string> sample_strings(std::map<std::string, c10::IValue>& d, const std::string& key,
                                        const std::string& path, int64_t n) {
    if (!d.count(key)) return {};
    auto out = as_strings(d[key], path, key);
    if (int64_t(out.size()) != n)
        throw InputError(path, key, "has " + std::to_string(out.size()) + " entries; expected " + std::to_string(n));
    return out;
}

ProbeSet load_pt(const std::string& path) {
    const auto bytes = read_all(path);
    const PtArchive ar = read_pt_archive(bytes, path);
    const c10::IValue& root = ar.root;
    if (!root.isGenericDict()) throw InputError(path, "", "expected a dict with key 'inputs', found " + root.tagKind());
    std::map<std::string, c10::IValue> d;
    for (const auto& kv : root.toGenericDict()) {
        if (!kv.key().isString()) throw InputError(path, "", "dict keys must be str");
        d[kv.key().toStringRef()] = kv.value();
    }
    static const std::set<std::string> known = {"inputs", "labels", "targets", "ids", "tags"};
    for (const auto& [k, v] : d)
        if (!known.count(k)) throw InputError(path, k, "unknown key; expected inputs, labels, targets, ids, tags");
    if (!d.count("inputs")) throw InputError(path, "inputs", "missing; expected a Tensor [N, ...] or a list of them");
    ProbeSet ps;
    const auto& in = d["inputs"];
    if (in.isTensor())
        ps.inputs.push_back(as_tensor(in, ar, path, "inputs", Want::Input));
    else if (in.isList() || in.isTuple()) {
        int i = 0;
        auto elems = in.isList() ? in.toListRef().vec() : in.toTupleRef().elements().vec();
        for (const auto& e : elems)
            ps.inputs.push_back(as_tensor(e, ar, path, "inputs[" + std::to_string(i++) + "]", Want::Input));
        if (ps.inputs.empty()) throw InputError(path, "inputs", "empty list; expected at least one Tensor");
    } else {
        throw InputError(path, "inputs", "expected a Tensor [N, ...] or a list of them, found " + in.tagKind());
    }
    for (size_t i = 0; i < ps.inputs.size(); ++i) {
        const auto& x = ps.inputs[i];
        const std::string field = in.isTensor() ? "inputs" : "inputs[" + std::to_string(i) + "]";
        if (x.dim() < 1) {  // a per-batch value (Hugging Face's num_items_in_batch): training data and replays only
            if (i == 0) throw InputError(path, field, "expected a batch dimension (rank >= 1), found a scalar");
            continue;
        }
        for (int64_t d = 1; d < x.dim(); ++d)
            if (x.size(d) == 0)
                throw InputError(
                    path, field,
                    "shape " + shape_str(x.sizes()) + " holds no values per sample (dimension " + std::to_string(d) +
                        " is 0: a sequence of length 0 has no position to compare); expected at least one");
    }
    const int64_t n = ps.inputs[0].size(0);
    for (size_t i = 1; i < ps.inputs.size(); ++i)
        if (ps.inputs[i].dim() > 0 && ps.inputs[i].size(0) != n)
            throw InputError(path, "inputs[" + std::to_string(i) + "]",
                             "has " + std::to_string(ps.inputs[i].size(0)) + " samples; expected " + std::to_string(n) +
                                 " like inputs[0]");
    if (n == 0) throw InputError(path, "inputs", "empty probe set; expected at least one sample");
    if (d.count("labels")) read_labels(d["labels"], ar, path, n, ps);
    if (d.count("targets")) {
        auto t = as_tensor(d["targets"], ar, path, "targets", Want::Floating);
        if (t.dim() < 1 || t.size(0) != n)
            throw InputError(path, "targets",
                             "expected a float Tensor [" + std::to_string(n) + ", ...], found " + shape_str(t.sizes()));
        t = t.reshape({n, -1}).contiguous();
        if (t.size(1) == 0)
            throw InputError(path, "targets", "has no values per sample; expected a float Tensor [N, K] with K >= 1");
        ps.target_width = int(t.size(1));
        ps.targets.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    }
    const auto ids = sample_strings(d, "ids", path, n), tags = sample_strings(d, "tags", path, n);
    for (int64_t i = 0; i < n; ++i)
        ps.samples.push_back(
            {ids.empty() ? std::to_string(i) : ids[size_t(i)], tags.empty() ? "ordinary" : tags[size_t(i)]});
    Sha256 h;
    h.update(bytes.data(), bytes.size());
    ps.info.sha256 = h.hex();
    return ps;
}

}  // namespace

bool scores_a_token_label(const ProbeSet& ps) {
    const size_t w = size_t(std::max(ps.label_width, 0));
    for (size_t i = 0; w > 0 && i < ps.labels.size(); ++i)
        if (i % w != 0 && ps.labels[i] != -100) return true;
    return false;
}

InputError no_token_label_scored(const std::string& file, const std::string& what) {
    return InputError(
        file, "labels",
        "every token label at positions 1 to T - 1 is -100 (ignored): nothing would be " + what +
            " (the logits at t predict the label at t + 1, so position 0's label never is); expected at least one "
            "label to score");
}

ProbeSet load_training_data(const std::string& source, Model& model, uint64_t seed, bool need_truth,
                            const std::string& field) {
    if (source != "demo") {
        ProbeSet ps;
        try {
            ps = load_probes(source, model, seed, /*scalar_inputs=*/true);
        } catch (
            const InputError& e) {  // the file itself (missing, a folder, another type): named as the caller's field
            if (e.file() == source && e.field() == "probes") throw InputError(source, field, e.expected());
            throw;
        }
        if (need_truth && ps.labels.empty() && ps.targets.empty())
            throw InputError(source, "labels", "training data needs labels (classifier) or targets (regressor)");
        if (ps.label_width > 0 && !scores_a_token_label(ps)) throw no_token_label_scored(source, "trained on");
        return ps;
    }
    if (model.info.kind != "demo")
        throw InputError("demo", field,
                         "the built-in training set belongs to the demo models; give a .pt or .csv file");
    // Classifiers: samples grouped by class in file order (batches are taken in file order),
    // each class a prototype pattern of magnitude ~30 plus noise. The head's gradient of a
    // one-class batch is then consistent across the batch: above 1 at the start, so that,
    // multiplied by GradScaler's initial 2^16, it overflows FP16 until the scale has backed
    // off once or twice, after which FP16 trains like FP32 (the story the demo tells).
    auto gen = at::detail::createCPUGenerator(seed + 777);
    const auto& shape = model.input_shapes.at(0);
    const int64_t n = 256;
    std::vector<int64_t> full = {n};
    full.insert(full.end(), shape.begin(), shape.end());
    ProbeSet ps;
    at::Tensor x;
    if (model.num_outputs >= 2) {
        const int64_t c = model.num_outputs;
        // one pattern per class, the same at every position (mean pooling keeps it whole)
        std::vector<int64_t> proto_shape = {c};
        for (size_t i = 0; i + 1 < shape.size(); ++i) proto_shape.push_back(1);
        proto_shape.push_back(shape.back());
        std::vector<int64_t> expand = {c};
        expand.insert(expand.end(), shape.begin(), shape.end());
        auto protos = (at::randn(proto_shape, gen) * 30.0).expand(expand);
        auto labels = at::arange(n, at::kLong).div(n / c, "floor").clamp_max(c - 1);
        x = protos.index_select(0, labels) + at::randn(full, gen) * 10.0;
        ps.labels.assign(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + n);
    } else {
        x = at::randn(full, gen) * 30.0;
        auto flat = x.reshape({n, -1, shape.back()}).mean(1);
        auto t = ((flat / 30.0).sin().sum(1, true) / 2.0).contiguous();
        ps.targets.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
        ps.target_width = 1;
    }
    ps.inputs.push_back(x.contiguous());
    for (int i = 0; i < 256; ++i) ps.samples.push_back({id_for("train", i), "ordinary"});
    Sha256 h;
    h.update(x.data_ptr(), x.nbytes());
    ps.info.sha256 = h.hex();
    ps.info.source = "demo";
    ps.info.count = 256;
    ps.info.tags["ordinary"] = 256;
    ps.info.has_labels = !ps.labels.empty();
    ps.info.has_targets = !ps.targets.empty();
    return ps;
}

namespace {

/// Valid UTF-8 without control characters (ids and tags are printed, stored and exported).
bool printable_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7F) return false;
        const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
        if (extra < 0 || i + size_t(extra) >= s.size()) return false;
        uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1Fu) : extra == 2 ? (c & 0x0Fu) : (c & 0x07u);
        for (int k = 1; k <= extra; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + size_t(k)]);
            if ((cc >> 6) != 0x2) return false;
            cp = (cp << 6) | (cc & 0x3Fu);
        }
        static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += size_t(extra) + 1;
    }
    return true;
}

void check_samples(const ProbeSet& ps, const std::string& file) {
    std::set<std::string> seen;
    for (size_t i = 0; i < ps.samples.size(); ++i) {
        const auto& s = ps.samples[i];
        if (s.id.empty()) throw InputError(file, "ids", "empty sample id; every sample needs a non-empty id");
        if (!printable_utf8(s.id))
            throw InputError(file, "ids",
                             "the id of sample " + std::to_string(i) +
                                 " is not printable UTF-8 text; expected UTF-8 without control characters");
        if (!printable_utf8(s.tag))
            throw InputError(file, "tags",
                             "the tag of sample " + std::to_string(i) +
                                 " is not printable UTF-8 text; expected UTF-8 without control characters");
        if (!seen.insert(s.id).second)
            throw InputError(file, "ids", "duplicate sample id '" + s.id + "'; ids must be unique");
    }
}

}  // namespace

ProbeSet read_probe_file(const std::string& source) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(source, ec)) throw InputError(source, "probes", "file not found");
    if (fs::is_directory(source, ec)) throw InputError(source, "probes", "is a directory; expected a .pt or .csv file");
    const auto ext = fs::path(source).extension().string();
    ProbeSet ps;
    if (ext == ".pt" || ext == ".pth")
        ps = load_pt(source);
    else if (ext == ".csv")
        ps = load_csv(source);
    else
        throw InputError(source, "probes", "unknown file type '" + ext + "'; expected .pt (torch.save dict) or .csv");
    check_samples(ps, source);
    if (!ps.labels.empty() && !ps.targets.empty())
        throw InputError(source, "labels",
                         "both labels and targets given; expected labels (classifier) or targets (regressor)");
    return ps;
}

ProbeSet load_probes(const std::string& source, Model& model, uint64_t seed, bool scalar_inputs) {
    ProbeSet ps;
    if (source == "demo") {
        if (model.info.kind != "demo")
            throw InputError(
                "demo", "probes",
                "the built-in probe set belongs to the demo models; give a .pt or .csv file for " + model.info.source);
        ps = demo_probes(model, seed);
    } else {
        ps = read_probe_file(source);
    }
    ps.info.source = source;
    const std::string file = source;
    for (size_t i = 0; i < ps.inputs.size() && !scalar_inputs; ++i)
        if (ps.inputs[i].dim() == 0)
            throw InputError(
                file, "inputs[" + std::to_string(i) + "]",
                "is a scalar; a comparison cuts the probes into batches along dimension 0: expected a Tensor [N, ...] "
                "(a per-batch scalar input is taken by train and replay only)");
    if (!model.input_names.empty() || model.info.kind == "torchscript") {
        const size_t given = ps.inputs.size(), most = model.input_names.size();
        if (given < model.required_inputs || given > most) {
            std::string names;
            for (const auto& nm : model.input_names) names += (names.empty() ? "" : ", ") + nm;
            throw InputError(file, "inputs",
                             "gives " + std::to_string(given) + " input tensor(s); the model's forward takes " +
                                 (model.required_inputs == most
                                      ? std::to_string(most)
                                      : std::to_string(model.required_inputs) + " to " + std::to_string(most)) +
                                 " (" + names + "): save 'inputs' as a list of that many tensors [N, ...]");
        }
    }
    // shapes against what the model expects, when known
    if (!model.input_shapes.empty()) {
        if (ps.inputs.size() != model.input_shapes.size())
            throw InputError(file, "inputs",
                             "has " + std::to_string(ps.inputs.size()) + " input tensors; the model takes " +
                                 std::to_string(model.input_shapes.size()));
        for (size_t i = 0; i < ps.inputs.size(); ++i) {
            if (ps.inputs[i].dim() == 0)
                continue;  // a per-batch scalar (scalar_inputs): checked by the program's signature
            const auto& want = model.input_shapes[i];
            auto got = ps.inputs[i].sizes().slice(1);
            if (got.vec() != want) {
                std::string expect = "[N";
                for (auto d : want) expect += ", " + std::to_string(d);
                throw InputError(file, ps.inputs.size() > 1 ? "inputs[" + std::to_string(i) + "]" : "inputs",
                                 "shape " + shape_str(ps.inputs[i].sizes()) + " does not fit the model; expected " +
                                     expect + "] (rank " + std::to_string(want.size() + 1) + ")");
            }
        }
        if (!ps.labels.empty() && model.num_outputs > 0 && ps.label_width == 0)
            for (size_t i = 0; i < ps.labels.size(); ++i)
                if (ps.labels[i] >= model.num_outputs)
                    throw InputError(file, "labels",
                                     "label " + std::to_string(ps.labels[i]) + " of sample '" + ps.samples[i].id +
                                         "' is out of range; the model has " + std::to_string(model.num_outputs) +
                                         " classes");
    }
    ps.info.count = int(ps.samples.size());
    for (const auto& s : ps.samples) ps.info.tags[s.tag]++;
    for (const auto& t : ps.inputs)
        ps.info.input_shapes.push_back(t.dim() == 0 ? std::vector<int64_t>{} : t.sizes().slice(1).vec());
    ps.info.has_labels = !ps.labels.empty();
    ps.info.has_targets = !ps.targets.empty();
    ps.info.label_width = ps.label_width;
    model.check_inputs(ps.inputs, ps.samples, file);  // the program's input spec, token ids against embeddings
    return ps;
}

}  // namespace ampscope::detail
