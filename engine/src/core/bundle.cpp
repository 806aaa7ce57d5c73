// SPDX-License-Identifier: MIT
#include "ampscope/engine/bundle.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/json_depth.h"
#include "ampscope/engine/vocabulary.h"

namespace ampscope {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kFormat = "ampscope-incident";
constexpr int kVersion = 1;

/// incident.json's fields, each checked for its type; errors name the file and the field.
class Fields {
public:
    Fields(const json& root, std::string file) : root_(root), file_(std::move(file)) {}

    const json& at(const json& obj, const std::string& path, const char* key, const char* expected) const {
        auto it = obj.find(key);
        if (it == obj.end()) throw InputError(file_, path, std::string("missing; expected ") + expected);
        return *it;
    }
    const json& object(const json& obj, const std::string& path, const char* key) const {
        const json& v = at(obj, path, key, "an object");
        if (!v.is_object()) throw wrong(path, v, "an object");
        return v;
    }
    std::string string(const json& obj, const std::string& path, const char* key,
                       const char* expected = "a string") const {
        const json& v = at(obj, path, key, expected);
        if (!v.is_string()) throw wrong(path, v, expected);
        return v.get<std::string>();
    }
    std::string one_of(const json& obj, const std::string& path, const char* key,
                       std::initializer_list<const char*> allowed) const {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : " | ") + std::string(a);
        std::string s = string(obj, path, key, list.c_str());
        for (const char* a : allowed)
            if (s == a) return s;
        throw InputError(file_, path, "'" + s + "'; expected " + list);
    }
    int64_t integer(const json& obj, const std::string& path, const char* key, int64_t min) const {
        const json& v = at(obj, path, key, "an integer");
        if (v.is_number_float())  // 1e30, 3.0: JSON numbers with a fraction or an exponent
            throw InputError(file_, path,
                             v.dump() + " is not an integer; expected an integer >= " + std::to_string(min));
        if (!v.is_number_integer()) throw wrong(path, v, "an integer");
        if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(INT64_MAX) : v.get<int64_t>() < min)
            throw InputError(file_, path, v.dump() + "; expected an integer >= " + std::to_string(min));
        return v.get<int64_t>();
    }
    bool boolean(const json& obj, const std::string& path, const char* key) const {
        const json& v = at(obj, path, key, "true or false");
        if (!v.is_boolean()) throw wrong(path, v, "true or false");
        return v.get<bool>();
    }
    /// null, or a string (file names, export_error).
    std::optional<std::string> maybe_string(const json& obj, const std::string& path, const char* key) const {
        const json& v = at(obj, path, key, "a string or null");
        if (v.is_null()) return std::nullopt;
        if (!v.is_string()) throw wrong(path, v, "a string or null");
        return v.get<std::string>();
    }
    const json& root() const { return root_; }
    const std::string& file() const { return file_; }

private:
    InputError wrong(const std::string& path, const json& v, const std::string& expected) const {
        return InputError(file_, path, std::string("a JSON ") + v.type_name() + "; expected " + expected);
    }
    const json& root_;
    std::string file_;
};

json parse_incident(const std::string& file) {
    auto bytes = read_regular_file(file, "", "incident.json, written by the capture package (docs/capture.md)");
    try {
        json j = json::parse(bytes.begin(), bytes.end(), json_depth_limit(file, "", "an incident.json object"));
        if (!j.is_object()) throw InputError(file, "", std::string("a JSON ") + j.type_name() + "; expected an object");
        return j;
    } catch (const json::parse_error& e) {
        throw InputError(file, "", std::string("not valid JSON (") + e.what() + "); expected an incident.json object");
    }
}

void read_header(const Fields& f, IncidentBundle& b) {
    const json& r = f.root();
    std::string format = f.string(r, "format", "format", "\"ampscope-incident\"");
    if (format != kFormat) throw InputError(f.file(), "format", "'" + format + "'; expected \"ampscope-incident\"");
    int64_t version = f.integer(r, "version", "version", 0);
    if (version != kVersion)
        throw InputError(f.file(), "version",
                         std::to_string(version) + "; this ampscope reads incident bundles of version 1");
    b.step = f.integer(r, "step", "step", 0);
    b.rank = f.integer(r, "rank", "rank", 0);
    b.world_size = f.integer(r, "world_size", "world_size", 1);
    if (b.rank >= b.world_size)
        throw InputError(f.file(), "rank",
                         std::to_string(b.rank) + "; expected below world_size " + std::to_string(b.world_size));
    b.accumulation_steps = f.integer(r, "accumulation_steps", "accumulation_steps", 1);
    const json& fw = f.object(r, "framework", "framework");
    b.framework = f.one_of(fw, "framework.name", "name", {"pytorch", "lightning", "transformers"});
    if (fw.contains("version")) b.framework_version = f.string(fw, "framework.version", "version");
    const json& det = f.object(r, "detected", "detected");
    b.detected_what = f.one_of(det, "detected.what", "what", {"loss", "grad", "grad_norm", "skip", "spike"});
    b.detected_detail = f.string(det, "detected.detail", "detail");
}

/// Optional (watch_ddp): the ranks the incident started on, each below world_size.
void read_origin_ranks(const Fields& f, IncidentBundle& b) {
    auto it = f.root().find("origin_ranks");
    if (it == f.root().end()) return;
    if (!it->is_array()) throw InputError(f.file(), "origin_ranks", "not a list; expected a list of ranks");
    for (size_t i = 0; i < it->size(); ++i) {
        const json& v = (*it)[i];
        const std::string field = "origin_ranks[" + std::to_string(i) + "]";
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= b.world_size)
            throw InputError(f.file(), field,
                             v.dump() + "; expected a rank below world_size " + std::to_string(b.world_size));
        if (std::find(b.origin_ranks.begin(), b.origin_ranks.end(), v.get<int64_t>()) != b.origin_ranks.end())
            throw InputError(f.file(), field, v.dump() + " again; expected each rank once");
        b.origin_ranks.push_back(v.get<int64_t>());
    }
}

void read_settings(const Fields& f, IncidentBundle& b) {
    const json& r = f.root();
    const json& prec = f.object(r, "precision", "precision");
    b.precision = f.one_of(prec, "precision.dtype", "dtype", {"float16", "bfloat16"}) == "float16" ? "fp16" : "bf16";
    b.device_type = f.one_of(prec, "precision.device_type", "device_type", {"cpu", "cuda"});
    const json& keep = f.at(prec, "precision.keep_fp32", "keep_fp32", "a list of module-path globs");
    if (!keep.is_array())
        throw InputError(f.file(), "precision.keep_fp32", "not a list; expected a list of module-path globs");
    for (size_t i = 0; i < keep.size(); ++i) {
        if (!keep[i].is_string())
            throw InputError(f.file(), "precision.keep_fp32[" + std::to_string(i) + "]",
                             "not a string; expected a module-path glob");
        b.keep_fp32.push_back(keep[i].get<std::string>());
    }
    b.loss = f.one_of(r, "loss", "loss", {"model", "ce", "mse", "lm"});
    const json& clip = f.at(r, "clip_grad_norm", "clip_grad_norm", "a positive number or null");
    if (!clip.is_null()) {
        if (!clip.is_number() || !std::isfinite(clip.get<double>()) || clip.get<double>() <= 0)
            throw InputError(f.file(), "clip_grad_norm", clip.dump() + "; expected a positive number or null");
        b.clip_grad_norm = clip.get<double>();
    }
    const json& opt = f.object(r, "optimizer", "optimizer");
    b.optimizer_kind = f.one_of(opt, "optimizer.kind", "kind", {"sgd", "adam", "adamw", "other"});
    b.optimizer_class = f.string(opt, "optimizer.class", "class");
    b.scaler = f.boolean(r, "scaler", "scaler");
    b.export_error = f.maybe_string(r, "export_error", "export_error").value_or("");
    read_origin_ranks(f, b);
}

/// A file the bundle names: a plain name inside the bundle, present, a regular file.
std::string bundle_file(const Fields& f, const fs::path& dir, const std::string& field, const std::string& name) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\\') != std::string::npos)
        throw InputError(f.file(), field, "'" + name + "'; expected a file name inside the bundle folder");
    std::string path = (dir / name).string();
    std::error_code ec;
    if (!fs::exists(path, ec)) throw InputError(path, "", "missing; " + f.file() + " field '" + field + "' names it");
    require_regular_file(path, "", "the bundle's " + field.substr(field.find('.') + 1) + " file");
    return path;
}

void read_files(const Fields& f, const fs::path& dir, IncidentBundle& b) {
    const json& files = f.object(f.root(), "files", "files");
    auto model = f.maybe_string(files, "files.model", "model");
    if (model) {
        b.model = bundle_file(f, dir, "files.model", *model);
    } else if (b.export_error.empty()) {
        throw InputError(f.file(), "export_error",
                         "null although files.model is null; expected why torch.export failed");
    }
    b.checkpoint = bundle_file(f, dir, "files.checkpoint", f.string(files, "files.checkpoint", "checkpoint"));
    b.batch = bundle_file(f, dir, "files.batch", f.string(files, "files.batch", "batch"));
}

}  // namespace

IncidentBundle read_bundle(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw InputError(
            dir, "",
            "not a folder; expected an incident bundle folder (incident.json, checkpoint.pt, batch.pt, model.pt2)");
    IncidentBundle b;
    b.dir = dir;
    const std::string file = (fs::path(dir) / "incident.json").string();
    if (!fs::exists(file, ec))
        throw InputError(file, "", "missing; expected an incident bundle folder written by ampscope_capture");
    const json root = parse_incident(file);
    Fields f(root, file);
    read_header(f, b);
    read_settings(f, b);
    read_files(f, fs::path(dir), b);
    return b;
}

ReplaySpec replay_spec_of(const IncidentBundle& b) {
    ReplaySpec s;
    s.model = b.model;
    s.checkpoint = b.checkpoint;
    s.batch = b.batch;
    s.loss = parse_loss_kind(b.loss);  // one of the names (read_settings)
    s.precision = b.precision == "bf16" ? Precision::Bf16 : Precision::Fp16;
    s.keep_fp32 = b.keep_fp32;
    s.clip_grad_norm = b.clip_grad_norm.value_or(0.0);
    s.clip_given = true;                         // the bundle says (null: the job did not clip)
    const auto& kinds = optimizer_kind_names();  // "other": the replay reads the state's own kind
    if (std::find(kinds.begin(), kinds.end(), b.optimizer_kind) != kinds.end()) {
        s.optimizer_kind = parse_optimizer_kind(b.optimizer_kind);
        s.optimizer_kind_from =
            "as the bundle's " + (fs::path(b.dir) / "incident.json").string() + " says in optimizer.kind";
    }
    s.no_scaler = !b.scaler;
    s.incident = ReplayIncident{b.dir,
                                b.detected_what,
                                b.detected_detail,
                                b.framework + (b.framework_version.empty() ? "" : " " + b.framework_version),
                                b.step,
                                b.rank,
                                b.world_size,
                                b.origin_ranks,
                                b.accumulation_steps};
    return s;
}

std::string incident_in_words(const ReplayResult& r) {
    if (!r.spec.incident) return "";
    const auto& i = *r.spec.incident;
    const std::string what = i.what == "loss"        ? "a non-finite loss"
                             : i.what == "grad"      ? "non-finite gradients"
                             : i.what == "grad_norm" ? "a non-finite gradient norm"
                             : i.what == "skip"      ? "a skipped step"
                                                     : "a loss spike";
    std::string rank =
        i.world_size > 1 ? " on rank " + std::to_string(i.rank) + " of " + std::to_string(i.world_size) : "";
    if (!i.origin_ranks.empty()) {  // the ranks exchanged what each saw before the collective
        std::string list;
        for (size_t k = 0; k < i.origin_ranks.size(); ++k)
            list += (k == 0 ? "" : k + 1 == i.origin_ranks.size() ? " and " : ", ") + std::to_string(i.origin_ranks[k]);
        rank += std::string(", where it started (") + (i.origin_ranks.size() == 1 ? "rank " : "ranks ") + list + ")";
    }
    const std::string found =
        r.first_nonfinite ? "the replay reproduces it"
        : i.what == "spike"
            ? "the replay finds no non-finite value (a spike is finite)"
            : "the replay does NOT reproduce it (a non-deterministic kernel, a data race or the hardware, or the "
              "bundle's batch is not the step's)";
    return "The job (" + i.framework + ") saw " + what + " at step " + std::to_string(i.step) + rank + "; " + found +
           ".";
}

}  // namespace ampscope
