// SPDX-License-Identifier: MIT
// The safetensors reader against files written by the reference writer (safetensors.torch in
// the test venv): every dtype read bitwise, metadata kept; and every malformed layout refused
// with an InputError naming the file and the key at fault.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ampscope/engine/errors.h"
#include "replay/safetensors.h"

using ampscope::InputError;
using ampscope::detail::parse_safetensors;

namespace {

std::string run(const std::string& cmd) {
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    return out;
}

std::string hex_of(const at::Tensor& t) {
    const auto b = t.contiguous().reshape({-1}).view(at::kByte);
    static const char* d = "0123456789abcdef";
    std::string s;
    for (int64_t i = 0; i < b.numel(); ++i) {
        const auto v = b[i].item<uint8_t>();
        s += d[v >> 4];
        s += d[v & 15];
    }
    return s;
}

/// A file: the 8-byte length, the header text, the data.
std::vector<char> file_of(const std::string& header, const std::string& data, uint64_t declared = UINT64_MAX) {
    const uint64_t n = declared == UINT64_MAX ? header.size() : declared;
    std::vector<char> out;
    for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

/// The InputError's message for bytes expected to be refused ("" when accepted).
std::string refusal(const std::vector<char>& bytes) {
    try {
        parse_safetensors(bytes, "bad.safetensors");
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Safetensors, ReadsWhatTheReferenceWriterWrote) {
    char path[] = "/tmp/ampscope-st-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    const auto text = run(std::string(AMPSCOPE_PYTHON) + " -W ignore " + AMPSCOPE_TESTS_DIR +
                          "/engine/safetensors_oracle.py " + path);
    ASSERT_FALSE(text.empty()) << "python oracle produced nothing";
    const auto want = nlohmann::json::parse(text);
    const auto got = ampscope::detail::read_safetensors(path);
    std::remove(path);
    ASSERT_EQ(got.tensors.size(), want["tensors"].size());
    for (const auto& [name, w] : want["tensors"].items()) {
        ASSERT_TRUE(got.tensors.count(name)) << name;
        const auto& t = got.tensors.at(name);
        const std::map<std::string, at::ScalarType> torch_names = {{"torch.float64", at::kDouble},
                                                                   {"torch.float32", at::kFloat},
                                                                   {"torch.float16", at::kHalf},
                                                                   {"torch.bfloat16", at::kBFloat16},
                                                                   {"torch.int64", at::kLong},
                                                                   {"torch.int32", at::kInt},
                                                                   {"torch.int16", at::kShort},
                                                                   {"torch.int8", at::kChar},
                                                                   {"torch.uint8", at::kByte},
                                                                   {"torch.bool", at::kBool},
                                                                   {"torch.float8_e4m3fn", at::kFloat8_e4m3fn},
                                                                   {"torch.float8_e5m2", at::kFloat8_e5m2}};
        EXPECT_EQ(t.scalar_type(), torch_names.at(w["dtype"].get<std::string>())) << name;
        EXPECT_EQ(t.sizes().vec(), w["shape"].get<std::vector<int64_t>>()) << name;
        EXPECT_EQ(hex_of(t), w["hex"].get<std::string>()) << name;
    }
    EXPECT_EQ(got.tensors.at("f8_e4m3").scalar_type(), at::kFloat8_e4m3fn);
    EXPECT_EQ(got.tensors.at("f8_e5m2").scalar_type(), at::kFloat8_e5m2);
    EXPECT_EQ(got.tensors.at("bf16").scalar_type(), at::kBFloat16);
    EXPECT_EQ(got.tensors.at("bool").scalar_type(), at::kBool);
    EXPECT_EQ(got.metadata.at("note"), "ampscope oracle");
}

TEST(Safetensors, AcceptsAHandWrittenFileWithPadding) {
    const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f
    const auto st =
        parse_safetensors(file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}    )", data), "ok");
    EXPECT_EQ(st.tensors.at("w")[1].item<float>(), 2.0f);
    EXPECT_TRUE(parse_safetensors(file_of("{}", ""), "empty").tensors.empty());
}

TEST(Safetensors, RefusesMalformedFilesNamingTheKey) {
    const std::string d8(8, '\0');
    const auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape, int b, int e) {
        return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
               std::to_string(b) + "," + std::to_string(e) + "]}";
    };
    struct Case {
        const char* what;
        std::vector<char> bytes;
        const char* expect;  // in the message
    };
    const std::vector<Case> cases = {
        {"shorter than 8 bytes", std::vector<char>(5, '\0'), "header length"},
        {"header over 100 MB", file_of("{}", "", 100'000'001), "at most 100000000"},
        {"header past the end", file_of("{}", "", 64), "only 2 follow"},
        {"not JSON", file_of("{\"a\":", ""), "not valid JSON"},
        {"not an object", file_of("[1,2]", ""), "starting with '{'"},
        {"unknown dtype", file_of("{" + entry("w.x", "U16", "[4]", 0, 8) + "}", d8), "'w.x'"},
        {"unknown dtype named", file_of("{" + entry("w.x", "C64", "[1]", 0, 8) + "}", d8), "C64"},
        {"size mismatch", file_of("{" + entry("b", "F32", "[3]", 0, 8) + "}", d8), "'b'"},
        {"overlap", file_of("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[1]", 4, 8) + "}", d8),
         "overlaps"},
        {"hole",
         file_of("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 8, 12) + "}", d8 + "1234"),
         "a hole"},
        {"out of range", file_of("{" + entry("a", "F32", "[4]", 0, 16) + "}", d8), "cover 16 bytes"},
        {"not covered", file_of("{" + entry("a", "F32", "[1]", 0, 4) + "}", d8), "holds 8"},
        {"end before begin", file_of("{" + entry("a", "F32", "[0]", 8, 0) + "}", d8), "end before begin"},
        {"negative shape", file_of("{" + entry("a", "F32", "[-2]", 0, 8) + "}", d8), "non-negative"},
        {"overflowing shape", file_of("{" + entry("a", "F32", "[4294967296,4294967296,4294967296]", 0, 8) + "}", d8),
         "overflows"},
        {"duplicate key",
         file_of("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("a", "F32", "[2]", 0, 8) + "}", d8), "twice"},
        {"metadata not strings", file_of(R"({"__metadata__":{"k":1}})", ""), "__metadata__.k"},
        {"missing offsets", file_of(R"({"w":{"dtype":"F32","shape":[2]}})", d8), "data_offsets"},
        // nlohmann ended the text at the NUL and accepted it; the format pads with spaces
        {"NUL padded", file_of("{" + entry("a", "F32", "[2]", 0, 8) + "}" + std::string(4, '\0'), d8), "NUL byte"},
        // no elements, but strides of 2^124: c10::Error "Stride calculation overflowed" (exit 3)
        {"zero-size, strides overflow",
         file_of("{" + entry("z", "F32", "[0,4611686018427387904,4611686018427387904]", 0, 0) + "," +
                     entry("a", "F32", "[2]", 0, 8) + "}",
                 d8),
         "'z'"},
    };
    for (const auto& c : cases) {
        const auto msg = refusal(c.bytes);
        EXPECT_NE(msg, "") << c.what << ": accepted";
        EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << c.what << ": " << msg;
        EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    }
}

TEST(Safetensors, HeaderParseIsNotQuadratic) {
    // 2e5 entries: nlohmann's parse callback rescanned the enclosing object at each entry's end
    // (1e5 entries took 160 s, 2e5 would take about 10 minutes); n log n takes a second or two.
    std::string header = "{";
    for (int i = 0; i < 200000; ++i)
        header +=
            (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
    header += "}";
    const auto t0 = std::chrono::steady_clock::now();
    const auto st = parse_safetensors(file_of(header, ""), "many.safetensors");
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(st.tensors.size(), 200000u);
    EXPECT_LT(secs, 60.0);
}

TEST(Safetensors, LargeFileIsMappedNotCopied) {
    // A valid 3 GB file (sparse) under an address-space limit 4 GB above what the process maps
    // already: read into a buffer and copied into a tensor it needed 6 GB (std::bad_alloc).
    char path[] = "/tmp/ampscope-st-big-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const uint64_t size = 3ull << 30;
    std::string header = R"({"big":{"dtype":"U8","shape":[)" + std::to_string(size) + "],\"data_offsets\":[0," +
                         std::to_string(size) + "]}}";
    header.append((8 - header.size() % 8) % 8, ' ');
    const auto head = file_of(header, "");
    ASSERT_EQ(write(fd, head.data(), head.size()), ssize_t(head.size()));
    ASSERT_EQ(ftruncate(fd, off_t(head.size() + size)), 0);
    close(fd);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        long pages = 0;
        if (FILE* f = std::fopen("/proc/self/statm", "r")) {
            if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
            std::fclose(f);
        }
        const rlim_t limit = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (4ull << 30);
        const rlimit rl{limit, limit};
        setrlimit(RLIMIT_AS, &rl);
        try {
            const auto st = ampscope::detail::read_safetensors(path);
            _exit(st.tensors.at("big").numel() == int64_t(size) && st.tensors.at("big")[size - 1].item<uint8_t>() == 0
                      ? 0
                      : 2);
        } catch (...) {
            _exit(1);
        }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::remove(path);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the read failed (out of address space), 2: wrong tensor";
}
