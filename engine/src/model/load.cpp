// SPDX-License-Identifier: MIT
// load_model: recognises the model's format and identifies it (file and weights hashes).
#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/hash.h"
#include "model/export_program.h"
#include "model/model.h"
#include "torchsave/pt_archive.h"

namespace ampscope::detail {

std::string weights_hash(const std::vector<std::pair<std::string, at::Tensor>>& state) {
    Sha256 h;
    for (const auto& [name, t] : state) {
        auto c = t.detach().to(at::kCPU).contiguous();
        h.update(name);
        h.update(std::string(c10::toString(c.scalar_type())));
        for (auto s : c.sizes()) h.update(&s, sizeof s);
        h.update(c.data_ptr(), c.nbytes());
    }
    return h.hex();
}

namespace {

std::vector<char> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw InputError(path, "model", "cannot be read");
    const std::streamoff size = f.tellg();
    std::vector<char> bytes(size > 0 ? size_t(size) : 0);  // one allocation of the file's size, not a growing copy
    f.seekg(0);
    if (size < 0 || !f.read(bytes.data(), std::streamsize(bytes.size())) || f.peek() != std::char_traits<char>::eof())
        throw InputError(path, "model", "cannot be read (changed in size while it was read, or a read error)");
    return bytes;
}

/// Why PyTorch's zip reader refused `bytes`: "not a zip archive", or what a zip archive lacks.
std::string zip_refusal(const std::vector<char>& bytes, const std::string& source) {
    const bool zip = bytes.size() >= 4 && (std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0 ||
                                           std::memcmp(bytes.data(), "PK\x05\x06", 4) == 0);
    if (!zip) return "not a zip archive";
    std::string why;
    try {
        open_checked_zip(bytes, source);
        return "a zip archive PyTorch's reader refuses";
    } catch (const c10::Error& e) {
        why = e.what_without_backtrace();
    } catch (const std::exception& e) {
        why = e.what();
    }
    why = why.substr(0, why.find('\n'));
    if (why.find("hasRecord(\"version\")") != std::string::npos)
        return "a zip archive without the 'version' record that torch.jit.save and torch.export.save write (removed, "
               "or the "
               "archive was repacked)";
    if (const auto p = why.find("  (Could this error message be improved?"); p != std::string::npos) why.resize(p);
    return "a zip archive PyTorch's reader refuses (" + why + ")";
}

/// The format is recognised by content, not by the file's extension.
/// `file_hash` receives the file's SHA-256 (from the bytes read once).
std::unique_ptr<Model> load_file(const std::string& source, const std::string& output, std::string& file_hash) {
    const auto owner = std::make_shared<std::vector<char>>(read_bytes(source));  // a .pt2's weights stay in it
    const auto& bytes = *owner;
    Sha256 h;
    h.update(bytes.data(), bytes.size());
    file_hash = h.hex();
    switch (pt2::sniff_zip(bytes, source)) {
        case pt2::ZipKind::Export: return load_export(bytes, source, output, owner);
        case pt2::ZipKind::AotInductor:
            throw InputError(source, "model",
                             "an AOTInductor package: compiled packages fix precision at compile time and "
                             "cannot be inspected; give the torch.export program (torch.export.save) instead");
        case pt2::ZipKind::NotZip:
            throw InputError(source, "model",
                             zip_refusal(bytes, source) +
                                 "; expected a TorchScript file (torch.jit.save) or a torch.export program "
                                 "(torch.export.save, .pt2)");
        case pt2::ZipKind::Other:
            throw InputError(source, "model",
                             "a zip archive that is neither a TorchScript file nor a torch.export program "
                             "(no models/*.json, code/ or constants.pkl); expected torch.jit.save or "
                             "torch.export.save output");
        case pt2::ZipKind::TorchScript: break;
    }
    return load_torchscript(source);
}

/// Said when floating weights are narrower than float32 (a model saved after .half() or
/// .to(torch.bfloat16), float8): the reference pass computes with them as stored, so it is no FP32
/// reference, and every comparison against it understates what mixed precision changes.
std::string low_precision_weights(const std::vector<std::pair<std::string, at::Tensor>>& state) {
    std::map<std::string, std::vector<std::string>> by_dtype;
    size_t floating = 0;
    for (const auto& [name, t] : state) {
        if (!t.is_floating_point()) continue;
        ++floating;
        // float64 is more precise (autocast leaves its ops alone): a float64 buffer is no broken reference
        if (c10::elementSize(t.scalar_type()) < 4) by_dtype[pt2::torch_name(t.scalar_type())].push_back(name);
    }
    if (by_dtype.empty()) return "";
    std::string what;
    for (const auto& [dtype, names] : by_dtype) {
        std::string some;
        for (size_t i = 0; i < names.size() && i < 3; ++i) some += (i ? ", " : "") + names[i];
        if (names.size() > 3) some += ", ...";
        what += (what.empty() ? "" : "; ") + std::to_string(names.size()) + " of " + std::to_string(floating) +
                " floating parameters and buffers are " + dtype + " (" + some + ")";
    }
    return "the model's weights are not float32: " + what +
           ": the fp32 reference computes with them as stored, so it is no FP32 reference and comparisons "
           "against it understate what mixed precision changes; save or export the model in float32";
}

}  // namespace

std::unique_ptr<Model> load_model(const std::string& source, uint64_t seed, const std::string& output) {
    std::unique_ptr<Model> model;
    if (source.rfind("demo:", 0) == 0) {
        model = make_demo_model(source.substr(5), source, seed);
    } else {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (!fs::exists(source, ec)) throw InputError(source, "model", "file not found");
        if (fs::is_directory(source, ec))
            throw InputError(source, "model",
                             "is a directory; expected a TorchScript file (.pt) or a torch.export program (.pt2)");
        std::string file_hash;
        model = load_file(source, output, file_hash);
        model->info.sha256 = file_hash;
    }
    if (!output.empty() && model->info.kind != "torch.export")
        throw InputError("", "output",
                         "'" + output + "': only torch.export programs with several outputs take an output name; " +
                             source + " returns one score tensor");
    model->info.source = source;
    auto state = model->named_state();
    model->info.weights_sha256 = weights_hash(state);
    if (auto w = low_precision_weights(state); !w.empty()) model->warnings.push_back(std::move(w));
    if (model->info.sha256.empty()) model->info.sha256 = model->info.weights_sha256;
    int64_t params = 0;
    for (const auto& p : model->parameters()) params += p.numel();
    model->info.parameters = params;
    model->info.modules = model->module_paths();
    return model;
}

}  // namespace ampscope::detail
