// SPDX-License-Identifier: MIT
// Checkpoints as users' Python training code writes them, read without Python: torch.save
// files through the probes' checked reader (pt_archive: every record, pickle length and tensor
// checked against the file; Python objects LibTorch cannot build skipped and named), and
// safetensors through our own reader. Formats: plain state_dict, a dict holding the model
// beside optimizer and scaler, Lightning .ckpt, Hugging Face Trainer checkpoint-N/ folders.
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_set>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/json_depth.h"
#include "replay/checkpoint.h"
#include "replay/safetensors.h"
#include "torchsave/pt_archive.h"

namespace ampscope::detail::ckpt {
namespace fs = std::filesystem;
namespace {

/// The file mapped, not read: a 4 GB file costs address space until a record is read from it.
std::shared_ptr<const MappedFile> read_bytes(const std::string& path) {
    return MappedFile::open(path, "", "a checkpoint file (torch.save or safetensors)");
}

/// Every tensor under `v` checked against the bytes its record holds. Each container is visited
/// once (`seen`): a pickle's shared references make a graph whose paths may be exponentially many.
void check_tensors(const c10::IValue& v, const PtArchive& ar, const std::string& file, const std::string& field,
                   std::unordered_set<const void*>& seen, int depth = 0) {
    if (depth > 64) throw InputError(file, field, "nested more than 64 levels deep");
    if (v.isTensor()) {
        check_tensor_fits(v.toTensor(), ar.bytes_for(v.toTensor()), file, field);
        return;
    }
    if (!(v.isGenericDict() || v.isList() || v.isTuple()) || !seen.insert(v.internalToPointer()).second) return;
    if (v.isGenericDict()) {
        for (const auto& kv : v.toGenericDict())
            check_tensors(kv.value(), ar, file,
                          field + (field.empty() ? "" : ".") + (kv.key().isString() ? kv.key().toStringRef() : "?"),
                          seen, depth + 1);
    } else if (v.isList()) {
        for (const auto& e : v.toListRef()) check_tensors(e, ar, file, field + "[]", seen, depth + 1);
    } else {
        for (const auto& e : v.toTupleRef().elements()) check_tensors(e, ar, file, field + "[]", seen, depth + 1);
    }
}

/// The root of a torch.save file, every tensor checked; skipped Python objects are warned.
/// A checkpoint `train --checkpoint-every` wrote (its pickle, data.pkl, holds "ampscope.format":
/// "ampscope-checkpoint-N"; LibTorch writes it after the tensors): InputError naming the file.
void refuse_ampscope_checkpoint(const char* data, size_t size, const std::string& path) {
    std::shared_ptr<caffe2::serialize::PyTorchStreamReader> zip;
    try {
        zip = open_checked_zip(data, size, path);
    } catch (const c10::Error&) {
        return;  // not a zip LibTorch reads: read_pt_archive names the damage
    }
    if (!zip->hasRecord("data.pkl")) return;
    at::DataPtr ptr;
    size_t n = 0;
    try {
        std::tie(ptr, n) = zip->getRecord("data.pkl");
    } catch (const c10::Error&) {
        return;  // a record that cannot be inflated: read_pt_archive names the damage
    }
    const std::string_view pkl(static_cast<const char*>(ptr.get()), n);
    const auto at = pkl.find("ampscope.format");
    if (at == std::string_view::npos || pkl.find("ampscope-checkpoint-", at) == std::string_view::npos) return;
    throw InputError(path, "ampscope.format",
                     "an ampscope training checkpoint (train --checkpoint-every); expected your own job's checkpoint "
                     "(a torch.save dict or state_dict, a Lightning .ckpt, a Hugging Face Trainer folder or a "
                     ".safetensors file); continue an ampscope training with `ampscope-cli train --resume`");
}

c10::IValue load_pt(const std::string& path, std::vector<std::string>& warnings) {
    const auto file = read_bytes(path);
    refuse_ampscope_checkpoint(file->data(), file->size(), path);  // both sides of a training, ampscope's layout
    std::vector<std::string> skipped;
    const auto ar = read_pt_archive(file->data(), file->size(), path, &skipped);
    if (!skipped.empty()) {
        std::string names;
        for (const auto& s : skipped) names += (names.empty() ? "" : ", ") + s;
        warnings.push_back(path + ": skipped pickled Python objects the C++ reader cannot build (" + names +
                           "); they are not needed for a replay");
    }
    std::unordered_set<const void*> seen;
    check_tensors(ar.root, ar, path, "", seen);
    return ar.root;
}

std::optional<c10::IValue> get(const c10::impl::GenericDict& d, const std::string& key) {
    for (const auto& kv : d)
        if (kv.key().isString() && kv.key().toStringRef() == key) return kv.value();
    return std::nullopt;
}

/// A dict of name -> Tensor (a state_dict), in file order.
std::vector<std::pair<std::string, at::Tensor>> tensors_of(const c10::IValue& v, const std::string& file,
                                                           const std::string& field) {
    if (!v.isGenericDict())
        throw InputError(file, field, "expected a dict of tensors (a state_dict), got " + v.tagKind());
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& kv : v.toGenericDict()) {
        if (!kv.key().isString())
            throw InputError(file, field, "has a key that is not a string; expected a state_dict");
        const auto& k = kv.key().toStringRef();
        if (!kv.value().isTensor())
            throw InputError(file, field.empty() ? k : field + "." + k,
                             "expected a Tensor, got " + kv.value().tagKind());
        out.emplace_back(k, kv.value().toTensor());
    }
    return out;
}

bool is_zip(const std::string& path) {
    require_regular_file(path, "", "a checkpoint file (torch.save or safetensors)");  // a FIFO would block the open
    std::ifstream in(path, std::ios::binary);
    char m[2] = {0, 0};
    in.read(m, 2);
    return m[0] == 'P' && m[1] == 'K';
}

/// torch.get_rng_state() (a uint8 tensor) and torch.cuda's, from {"cpu": t, "cuda": t | [t, ...]}
/// or a bare tensor (the CPU's).
void read_rng(Checkpoint& c, const c10::IValue& v, const std::string& file, const std::string& field) {
    auto state = [&](const c10::IValue& x, const std::string& f) {
        if (!x.isTensor() || x.toTensor().scalar_type() != at::kByte || x.toTensor().dim() != 1)
            throw InputError(
                file, f, "expected a generator state (torch.get_rng_state(): a 1-D uint8 tensor), got " + x.tagKind());
        return x.toTensor().contiguous().clone();
    };
    if (v.isTensor()) {
        c.rng_cpu = state(v, field);
    } else if (v.isGenericDict()) {
        const auto d = v.toGenericDict();
        if (auto cpu = get(d, "cpu")) c.rng_cpu = state(*cpu, field + ".cpu");
        if (auto cuda = get(d, "cuda")) {
            if (cuda->isTensor())
                c.rng_cuda.push_back(state(*cuda, field + ".cuda"));
            else if (cuda->isList() || cuda->isTuple())
                for (const auto& e : cuda->isList() ? cuda->toListRef().vec() : cuda->toTupleRef().elements().vec())
                    c.rng_cuda.push_back(state(e, field + ".cuda[]"));
        }
    } else {
        throw InputError(file, field, "expected {\"cpu\": torch.get_rng_state(), ...}, got " + v.tagKind());
    }
    if (c.rng_cpu.defined()) c.rng_file = file + (field.empty() ? "" : " (" + field + ")");
}

/// model / state_dict / model_state_dict beside optimizer and scaler; or Lightning's keys.
void read_torch_dict(Checkpoint& c, const c10::IValue& root, const std::string& path) {
    if (!root.isGenericDict())
        throw InputError(
            path, "", "expected a dict saved by torch.save (a state_dict or a checkpoint dict), got " + root.tagKind());
    const auto d = root.toGenericDict();
    const bool lightning = get(d, "state_dict") &&
                           (get(d, "optimizer_states") || get(d, "pytorch-lightning_version") || get(d, "global_step"));
    if (lightning) {
        c.format = "lightning";
        c.weights = tensors_of(*get(d, "state_dict"), path, "state_dict");
        if (auto os = get(d, "optimizer_states")) {
            if (!os->isList()) throw InputError(path, "optimizer_states", "expected a list of optimizer state dicts");
            const auto l = os->toListRef();
            if (l.size() > 1)
                c.warnings.push_back(path + ": " + std::to_string(l.size()) + " optimizers; the first is replayed");
            if (!l.empty()) c.optimizer = read_optimizer(l[0], path, "optimizer_states[0]");
        }
        for (const char* k :
             {"MixedPrecision", "MixedPrecisionPlugin", "native_amp_scaling_state", "amp_scaling_state"})
            if (auto s = get(d, k)) {
                c.scaler = read_scaler(*s, path, k);
                c.scaler_disabled = !c.scaler;
                break;
            }
        return;
    }
    for (const char* k : {"model", "state_dict", "model_state_dict"})
        if (auto m = get(d, k); m && m->isGenericDict()) {
            c.format = "dict";
            c.weights = tensors_of(*m, path, k);
            for (const char* o : {"optimizer", "optimizer_state_dict", "opt"})
                if (auto v = get(d, o)) c.optimizer = read_optimizer(*v, path, o);
            for (const char* s : {"scaler", "scaler_state_dict", "grad_scaler"})
                if (auto v = get(d, s)) {
                    c.scaler = read_scaler(*v, path, s);
                    c.scaler_disabled = !c.scaler;
                }
            for (const char* r : {"rng_state", "rng_states"})
                if (auto v = get(d, r)) read_rng(c, *v, path, r);
            return;
        }
    c.format = "state_dict";
    c.weights = tensors_of(root, path, "");
}

/// The shards an index JSON names, each read once, holding the tensors the index maps to it.
void read_shards(Checkpoint& c, const fs::path& dir, const fs::path& ip) {
    nlohmann::json j;
    try {
        require_regular_file(ip.string(), "", "the Trainer's index JSON");
        std::ifstream in(ip);
        j = nlohmann::json::parse(in, json_depth_limit(ip.string(), "", "{\"weight_map\": ...}"));
    } catch (const InputError&) {
        throw;
    } catch (const std::exception& e) {
        throw InputError(ip.string(), "", std::string("is not valid JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        throw InputError(ip.string(), "weight_map", "missing; expected {\"weight_map\": {name: shard file}}");
    std::set<std::string> shards;
    for (const auto& [k, v] : j["weight_map"].items()) {
        const auto name = v.is_string() ? v.get<std::string>() : std::string();
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
            throw InputError(ip.string(), "weight_map." + k, "expected a shard file name in the same folder");
        shards.insert(name);
    }
    for (const auto& s : shards) {
        const auto sp = (dir / s).string();
        if (!fs::exists(sp)) throw InputError(sp, "", "missing: named by " + ip.string());
        c.files.push_back(sp);
        std::vector<std::pair<std::string, at::Tensor>> w;
        if (is_zip(sp))
            w = tensors_of(load_pt(sp, c.warnings), sp, "");
        else
            for (auto& [k, t] : read_safetensors(sp).tensors) w.emplace_back(k, t);
        for (auto& kt : w)
            if (j["weight_map"].contains(kt.first) && j["weight_map"][kt.first] == s) c.weights.push_back(kt);
    }
}

/// What the Trainer loads (_load_from_checkpoint): model.safetensors, else pytorch_model.bin,
/// else the shards of an index JSON. A stale index beside a single file is not read.
void read_trainer_weights(Checkpoint& c, const fs::path& dir) {
    if (fs::exists(dir / "model.safetensors")) {
        c.files.push_back((dir / "model.safetensors").string());
        for (auto& [k, t] : read_safetensors(c.files.back()).tensors) c.weights.emplace_back(k, t);
        return;
    }
    if (fs::exists(dir / "pytorch_model.bin")) {
        c.files.push_back((dir / "pytorch_model.bin").string());
        c.weights = tensors_of(load_pt(c.files.back(), c.warnings), c.files.back(), "");
        return;
    }
    for (const char* index : {"model.safetensors.index.json", "pytorch_model.bin.index.json"})
        if (fs::exists(dir / index)) return read_shards(c, dir, dir / index);
    throw InputError(dir.string(), "model.safetensors",
                     "missing: a Trainer checkpoint folder holds model.safetensors or pytorch_model.bin (sharded: with "
                     "its index JSON)");
}

void read_trainer_folder(Checkpoint& c, const fs::path& dir) {
    c.format = "hf-trainer";
    read_trainer_weights(c, dir);
    if (fs::exists(dir / "optimizer.pt")) {
        c.files.push_back((dir / "optimizer.pt").string());
        c.optimizer = read_optimizer(load_pt(c.files.back(), c.warnings), c.files.back(), "");
    }
    if (fs::exists(dir / "scaler.pt")) {
        c.files.push_back((dir / "scaler.pt").string());
        c.scaler = read_scaler(load_pt(c.files.back(), c.warnings), c.files.back(), "");
        c.scaler_disabled = !c.scaler;
    } else {
        c.scaler_absent_note =
            dir.string() +
            ": no scaler.pt (a bf16 job has none; some transformers versions did not save an fp16 job's: a "
            "resumed job then restarted at its initial scale)";
    }
    if (fs::exists(dir / "rng_state.pth")) {  // a single-process job's (rng_state_N.pth: rank N's)
        const auto rp = (dir / "rng_state.pth").string();
        try {
            read_rng(c, load_pt(rp, c.warnings), rp, "");
            c.files.push_back(rp);
        } catch (const InputError& e) {
            c.warnings.push_back(std::string("the job's RNG state is not restored: ") + e.what());
        }
    }
}

}  // namespace

c10::IValue read_pt_root(const std::string& path, std::vector<std::string>* warnings) {
    std::vector<std::string> w;
    auto v = load_pt(path, warnings ? *warnings : w);
    return v;
}

Checkpoint load_checkpoint(const std::string& path, const std::string& strip_prefix) {
    Checkpoint c;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        read_trainer_folder(c, path);
    } else if (!fs::exists(path, ec)) {
        throw InputError(path, "checkpoint",
                         "does not exist; expected a checkpoint file or a Trainer checkpoint-N/ folder");
    } else if (is_zip(path)) {
        c.files.push_back(path);
        read_torch_dict(c, load_pt(path, c.warnings), path);
    } else {
        c.files.push_back(path);
        c.format = "safetensors";
        for (auto& [k, t] : read_safetensors(path).tensors) c.weights.emplace_back(k, t);
    }
    if (!strip_prefix.empty())
        for (auto& [k, t] : c.weights)
            if (k.rfind(strip_prefix, 0) == 0) k = k.substr(strip_prefix.size());
    return c;
}

Match apply_weights(const Checkpoint& c, const std::vector<std::pair<std::string, at::Tensor>>& state,
                    const std::set<std::string>& non_persistent) {
    Match m;
    std::map<std::string, at::Tensor> model;
    for (const auto& [k, t] : state)
        if (!non_persistent.count(k)) model.emplace(k, t);
    std::set<std::string> seen;
    std::set<const void*> loaded;  // tied parameters: one tensor under two names
    at::NoGradGuard ng;
    for (const auto& [k, t] : c.weights) {
        const auto it = model.find(k);
        if (it == model.end()) {
            m.unexpected.push_back(k);
            continue;
        }
        seen.insert(k);
        if (t.sizes() != it->second.sizes())
            m.mismatched.push_back(k + ": shape " + c10::str(t.sizes()) + " in the checkpoint, " +
                                   c10::str(it->second.sizes()) + " in the model");
        else if (t.scalar_type() != it->second.scalar_type())
            m.mismatched.push_back(k + ": dtype " + std::string(c10::toString(t.scalar_type())) +
                                   " in the checkpoint, " + c10::toString(it->second.scalar_type()) + " in the model");
        else {
            it->second.copy_(t);
            loaded.insert(it->second.unsafeGetTensorImpl());
        }
    }
    for (const auto& [k, t] : state)  // a tied name loaded through its partner is not missing (Hugging Face saves one)
        if (!seen.count(k) && !non_persistent.count(k) && !loaded.count(t.unsafeGetTensorImpl()))
            m.missing.push_back(k);
    return m;
}

}  // namespace ampscope::detail::ckpt
