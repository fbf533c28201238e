#include "system_corpus.hpp"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include "admission/tokenizer/utf8.hpp"

namespace dpgate::bench {

namespace {

namespace fs = std::filesystem;

// Per-file caps: a page or header contributes at most this much, so one huge
// file (bash.1, a generated header) cannot make up a language's whole share.
constexpr std::size_t kManFileCapBytes = 12 * 1024;
constexpr std::size_t kHeaderFileCapBytes = 32 * 1024;

template <typename Keep>
std::vector<fs::path> sortedFiles(const fs::path& root, Keep keep) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
        // Symlinks (man page aliases, compatibility headers) would repeat text.
        if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
        if (keep(it->path())) out.push_back(it->path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// gzread reads plain files as they are, so compressed and uncompressed pages both work.
std::string readFile(const fs::path& path, std::size_t max_bytes) {
    std::string out;
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) return out;
    char buf[16384];
    int n = 0;
    while (out.size() < max_bytes * 2 && (n = gzread(file, buf, sizeof buf)) > 0)
        out.append(buf, static_cast<std::size_t>(n));
    gzclose(file);
    return out;
}

std::string cutOnCharBoundary(std::string text, std::size_t bytes) {
    if (text.size() <= bytes) return text;
    while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xc0) == 0x80) --bytes;
    text.resize(bytes);
    return text;
}

// Up to `budget` bytes from `files`, spread over the whole sorted list: every
// stride-th file first, then the next offset, until the budget is filled.
std::vector<std::string> take(const std::vector<fs::path>& files, std::size_t budget, std::size_t cap_bytes) {
    std::vector<std::string> out;
    if (files.empty()) return out;
    const std::size_t wanted = std::max<std::size_t>(1, budget / cap_bytes);
    const std::size_t stride = std::max<std::size_t>(1, files.size() / wanted);
    std::size_t total = 0;
    for (std::size_t start = 0; start < stride && total < budget; ++start) {
        for (std::size_t i = start; i < files.size() && total < budget; i += stride) {
            std::string text = readFile(files[i], cap_bytes);
            if (text.empty() || admission::findInvalidUtf8(text) != admission::kValidUtf8) continue;
            text = cutOnCharBoundary(std::move(text), std::min(cap_bytes, budget - total));
            total += text.size();
            out.push_back(std::move(text));
        }
    }
    return out;
}

bool isHeader(const fs::path& path) {
    const std::string ext = path.extension().string();
    if (ext == ".h" || ext == ".hpp" || ext == ".hh" || ext == ".tcc") return true;
    // The C++ standard library's own headers have no extension.
    return ext.empty() && path.string().find("/c++/") != std::string::npos;
}

}  // namespace

SystemCorpus systemCorpus(std::size_t bytes, const std::string& man_root, const std::string& include_root) {
    SystemCorpus corpus;
    // Languages: English is the top-level man1..man9 folders, every other
    // folder is a locale (de, ja, zh_CN, ...) with its own man*/ inside.
    std::vector<std::vector<fs::path>> languages;
    {
        std::vector<fs::path> english;
        std::vector<fs::path> dirs;
        std::error_code ec;
        for (fs::directory_iterator it(man_root, ec), end; !ec && it != end; it.increment(ec)) {
            if (!it->is_symlink(ec) && it->is_directory(ec)) dirs.push_back(it->path());
        }
        std::sort(dirs.begin(), dirs.end());
        const auto any = [](const fs::path&) { return true; };
        for (const fs::path& dir : dirs) {
            std::vector<fs::path> files = sortedFiles(dir, any);
            if (files.empty()) continue;
            if (dir.filename().string().rfind("man", 0) == 0) {
                english.insert(english.end(), files.begin(), files.end());
            } else {
                languages.push_back(std::move(files));
            }
        }
        std::sort(english.begin(), english.end());
        if (!english.empty()) languages.insert(languages.begin(), std::move(english));
    }
    corpus.languages = languages.size();
    const std::size_t man_budget = bytes / 2;
    std::vector<std::string> man;
    for (const auto& files : languages) {
        auto pages = take(files, man_budget / std::max<std::size_t>(1, languages.size()), kManFileCapBytes);
        for (auto& page : pages) man.push_back(std::move(page));
    }
    std::size_t man_total = 0;
    for (const auto& page : man) man_total += page.size();
    // Headers fill the rest, so the corpus reaches `bytes` even when few man pages exist.
    const std::vector<std::string> headers =
        take(sortedFiles(include_root, isHeader), bytes - std::min(bytes, man_total), kHeaderFileCapBytes);
    // Interleaved file by file, whichever side has contributed fewer bytes
    // next: every stretch of the text mixes scripts, troff and C++.
    std::size_t m = 0;
    std::size_t h = 0;
    while (m < man.size() || h < headers.size()) {
        if (h == headers.size() || (m < man.size() && corpus.man_bytes <= corpus.header_bytes)) {
            corpus.text += man[m];
            corpus.man_bytes += man[m++].size();
            ++corpus.man_files;
        } else {
            corpus.text += headers[h];
            corpus.header_bytes += headers[h++].size();
            ++corpus.header_files;
        }
    }
    corpus.text = cutOnCharBoundary(std::move(corpus.text), bytes);
    return corpus;
}

}  // namespace dpgate::bench
