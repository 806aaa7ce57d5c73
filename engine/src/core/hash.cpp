// SPDX-License-Identifier: MIT
// SHA-256 of bytes and files (OpenSSL's EVP digest): the hashes runs record for models, weights,
// probe sets, checkpoints and batches.
#include <openssl/evp.h>

#include <fstream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/hash.h"

namespace ampscope {

struct Sha256::Impl {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : d(std::make_unique<Impl>()) {
    EVP_DigestInit_ex(d->ctx, EVP_sha256(), nullptr);
}
Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
    EVP_DigestUpdate(d->ctx, data, size);
}

std::string Sha256::hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(d->ctx, md, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 15];
    }
    return out;
}

std::string sha256_file(const std::string& path) {
    require_regular_file(path, "",
                         "a file (checkpoint, batch, model or probe file)");  // a FIFO would block, /dev/zero never end
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "", "cannot open file for reading");
    Sha256 h;
    char buf[1 << 16];
    while (in) {
        in.read(buf, sizeof buf);
        if (in.gcount() > 0) h.update(buf, size_t(in.gcount()));
    }
    return h.hex();
}

}  // namespace ampscope
