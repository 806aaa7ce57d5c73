// SPDX-License-Identifier: MIT
#pragma once
// The opcodes of a pickle walked without building anything: declared lengths checked against
// the bytes left (pt_archive.cpp), the shape of what it would build (nesting depth), and the
// rewrite of classes LibTorch cannot build (pt_lenient.cpp). Engine-internal.

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

#include "ampscope/engine/errors.h"

namespace ampscope::detail {

/// Walks the opcodes of a pickle and refuses any length it declares beyond the bytes left:
/// LibTorch's Unpickler reserves a declared length before reading it (a 2 KB file could ask
/// for 4 GB). Opcodes outside the set the Unpickler knows are refused here too.
class PickleWalker {
public:
    /// Called after each opcode with its byte range [begin, end) (arguments included).
    using OnOp = std::function<void(unsigned char op, size_t begin, size_t end)>;
    PickleWalker(const char* data, size_t size, const std::string& file, OnOp on_op = {})
        : data_(data), size_(size), file_(file), on_op_(std::move(on_op)) {}

    void walk() {
        while (pos_ < size_) {
            const size_t begin = pos_;
            const auto op = static_cast<unsigned char>(data_[pos_++]);
            const bool more = step(op);
            if (on_op_) on_op_(op, begin, pos_);
            if (!more) return;
        }
        fail("no STOP opcode before the end");
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw InputError(file_, "data.pkl",
                         what + " at byte " + std::to_string(pos_) + " of " + std::to_string(size_) +
                             " (a damaged or hostile pickle)");
    }
    void need(uint64_t n) const {
        if (n > size_ - pos_)
            fail("declares " + std::to_string(n) + " bytes, but " + std::to_string(size_ - pos_) + " remain");
    }
    /// A little-endian integer of `bytes` bytes.
    uint64_t le(int bytes) {
        need(uint64_t(bytes));
        uint64_t v = 0;
        for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(data_[pos_ + size_t(i)]);
        pos_ += size_t(bytes);
        return v;
    }
    /// A payload whose length was just read.
    void skip(uint64_t n) {
        need(n);
        pos_ += size_t(n);
    }
    void line() {
        const void* nl = std::memchr(data_ + pos_, '\n', size_ - pos_);
        if (!nl) fail("an unterminated line");
        pos_ = size_t(static_cast<const char*>(nl) - data_) + 1;
    }
    /// The memo is filled in order (0, 1, 2, ...); LibTorch's unpickler grows its table to any
    /// index it is given, so a sparse index (31 GB from a 4-byte LONG_BINPUT) is refused.
    void put(uint64_t index) {
        if (index > memo_)
            fail("memo index " + std::to_string(index) + " out of order (next is " + std::to_string(memo_) + ")");
        memo_ = std::max(memo_, index + 1);
    }

    /// What an opcode's arguments are, by opcode: the protocol 0-5 opcodes torch.save can write.
    enum class Args : unsigned char {
        Refused,
        None,
        Line,
        TwoLines,
        Int1,
        Int2,
        Int4,
        Int8,
        Len1,
        Len4,
        Len8,
        Memoize,
        Put,
        Put1,
        Put4,
        Stop
    };
    static const std::array<Args, 256>& opcodes() {
        static const std::array<Args, 256> table = [] {
            std::array<Args, 256> t{};  // Refused
            const std::pair<std::string_view, Args> rows[] = {
                {"(012NQRabd}el]ostu)\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93", Args::None},
                {"FILPSVg", Args::Line},
                {"ci", Args::TwoLines},
                {"Kh\x80\x82", Args::Int1},
                {"M\x83", Args::Int2},
                {"Jj\x84", Args::Int4},
                {"G\x95", Args::Int8},
                {"UC\x8c\x8a", Args::Len1},
                {"TXB\x8b", Args::Len4},
                {"\x8d\x8e", Args::Len8},
                {"\x94", Args::Memoize},
                {"p", Args::Put},
                {"q", Args::Put1},
                {"r", Args::Put4},
                {".", Args::Stop},
            };
            for (const auto& [ops, args] : rows)
                for (const char op : ops) t[static_cast<unsigned char>(op)] = args;
            return t;
        }();
        return table;
    }

    /// One opcode (already consumed) and its arguments; false at STOP.
    bool step(unsigned char op) {
        switch (opcodes()[op]) {
            case Args::None: break;
            case Args::Line: line(); break;
            case Args::TwoLines: line(), line(); break;
            case Args::Int1: le(1); break;
            case Args::Int2: le(2); break;
            case Args::Int4: le(4); break;
            case Args::Int8: le(8); break;
            case Args::Len1: skip(le(1)); break;
            case Args::Len4: skip(le(4)); break;
            case Args::Len8: skip(le(8)); break;
            case Args::Memoize: put(memo_); break;
            case Args::Put: {  // PUT: a decimal index on its own line
                const size_t start = pos_;
                line();
                put(std::strtoull(std::string(data_ + start, pos_ - 1 - start).c_str(), nullptr, 10));
                break;
            }
            case Args::Put1: put(le(1)); break;
            case Args::Put4: put(le(4)); break;
            case Args::Stop: return false;
            case Args::Refused: {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", op);
                --pos_;
                fail(std::string("pickle opcode ") + hex + " that torch.save does not write");
            }
        }
        return true;
    }

    const char* data_;
    size_t size_;
    const std::string& file_;
    OnOp on_op_;
    size_t pos_ = 0;
    uint64_t memo_ = 0;
};

inline void check_pickle_lengths(const char* data, size_t size, const std::string& file) {
    PickleWalker(data, size, file).walk();
}

/// One opcode of a pickle: the byte and its range [begin, end) with its arguments.
struct Op {
    unsigned char op;
    size_t begin, end;
};

inline bool is_put(unsigned char op) {
    return op == 'p' || op == 'q' || op == 'r' || op == 0x94;
}

/// The memo index a PUT or GET opcode names.
inline uint64_t memo_index(const char* data, const Op& o) {
    if (o.op == 'p' || o.op == 'g')
        return std::strtoull(std::string(data + o.begin + 1, o.end - o.begin - 2).c_str(), nullptr, 10);
    uint64_t v = 0;
    for (size_t k = o.end; k-- > o.begin + 1;) v = (v << 8) | static_cast<unsigned char>(data[k]);
    return v;
}

}  // namespace ampscope::detail
