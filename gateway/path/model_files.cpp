#include "gateway/path/model_files.hpp"

#include "conf/sha256_hex.hpp"

#include <stdexcept>

namespace dpgate::gateway {

ModelFiles loadModelFiles(const conf::ModelConfig& model) {
    ModelFiles files;
    if (model.tokenizer.empty()) {
        files.summary += "model.tokenizer is not set: requests that need an exact count get 503\n";
    } else {
        admission::TokenizerLoad load = admission::Tokenizer::load(model.tokenizer);
        if (!load.tokenizer) throw std::runtime_error("model.tokenizer: " + model.tokenizer + ": " + load.error);
        files.tokenizer = std::move(load.tokenizer);
        files.summary += "tokenizer: " + model.tokenizer + "\n";
    }
    if (model.tokenizer.empty() && model.chat_template.empty()) {
        files.summary += "no chat template (set model.tokenizer or model.chat_template): chat requests get 503\n";
        return files;
    }
    admission::ChatTemplate::LoadOptions options;
    options.tokenizer = model.tokenizer;
    options.chat_template = model.chat_template;
    options.content_format = model.chat_template_content_format;
    std::string error;
    files.chat_template = admission::ChatTemplate::load(options, error);
    if (!files.chat_template) {
        throw std::runtime_error(std::string(model.chat_template.empty() ? "model.tokenizer" : "model.chat_template") +
                                 ": " + error);
    }
    const admission::ChatTemplate& t = *files.chat_template;
    files.summary += "chat template: " + t.origin() + " (sha256 " + conf::sha256Hex(t.source()).substr(0, 16) + ")";
    for (const auto& variant : t.variants()) {
        if (t.variants().size() > 1) files.summary += "; " + variant.name;
        files.summary += ", content format " + std::string(admission::contentFormatName(variant.content_format)) +
                         (model.chat_template_content_format == "auto" ? " (detected)" : " (configured)");
    }
    if (t.rendersTools()) {
        files.summary += std::string(", renders tool definitions: ") + (*t.rendersTools() ? "yes" : "no") + "\n";
    } else {
        files.summary += ", renders tool definitions: unknown (the probe request failed: " + t.probeError() + ")\n";
    }
    return files;
}

}  // namespace dpgate::gateway
